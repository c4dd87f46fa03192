"""docs/benchmarks.md's throughput sections: each `auto` row is the precision
``search_spaces.precision_rule`` decides at the section's probe figure, with the figures
of ours in that precision (the same loop, not timed again)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from search_spaces.precision_rule import Probe, sweep_precision

BENCHMARKS = Path(__file__).parents[2] / "docs" / "benchmarks.md"


def throughput_sections() -> dict[str, str]:
    text = BENCHMARKS.read_text()
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    return {
        part.splitlines()[0]: part
        for part in parts
        if part.startswith("Training throughput: ours vs Trainer on ")
    }


def table_rows(section: str) -> list[list[str]]:
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| data set")
    ]
    return rows


def test_both_host_kinds_have_a_section() -> None:
    assert {title.rsplit(" on ", 1)[1] for title in throughput_sections()} >= {
        "AMD EPYC",
        "Intel Xeon",
    }


@pytest.mark.parametrize("title", sorted(throughput_sections()))
def test_the_auto_rows_are_the_rules_choice_at_the_probes_figure(title: str) -> None:
    section = throughput_sections()[title]
    (speedup,) = re.findall(r"at (\d+\.\d+)× fp32's on this CPU", section)
    chosen = {
        sweep_precision(Probe("cpu", float(speedup)), formulation)[0]
        for formulation in ("tagger", "pair classifier")
    }
    assert len(chosen) == 1
    (precision,) = chosen
    assert f"`precision: auto` is {precision} here" in section
    rows = table_rows(section)
    datasets = {row[0] for row in rows}
    assert datasets == {"mrpc", "conll2003"}
    for dataset in datasets:
        (auto,) = [r for r in rows if r[0] == dataset and r[2].startswith("auto")]
        (ours,) = [r for r in rows if r[0] == dataset and r[1:3] == ["ours", precision]]
        assert auto[2] == f"auto → {precision}"
        # Steps, examples/s, range and the ratio to Trainer's fp32: ours in that precision.
        assert auto[3:7] == ours[3:7]
