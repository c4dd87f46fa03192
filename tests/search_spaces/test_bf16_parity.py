"""benchmarks/bf16_parity.py: bf16 against fp32 from two published sweeps' trials."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bf16_parity import load_trials, parity  # noqa: E402


def _publish(folder: Path, name: str, precision: str, scores: dict[str, list[float]]) -> None:
    """A trials CSV as scripts/publish_study.py writes it: final-stage trials, 3 seeds."""
    rows = [
        {
            "loss": loss,
            "dataset": "mrpc",
            "variant": "original",
            "seed": seed,
            "status": "FINISHED",
            "stage": "final",
            "precision": precision,
            "optimizer_steps": 920,
            "eval_f1": score,
            "last_evaluations_range": 0.2 * (seed + 1),
        }
        for loss, values in scores.items()
        for seed, score in enumerate(values)
    ]
    pd.DataFrame(rows).to_csv(folder / f"{name}-trials.csv", index=False)


def test_the_paired_difference_and_what_the_seeds_resolve(tmp_path: Path) -> None:
    _publish(tmp_path, "a", "fp32", {"ce": [60.0, 64.0, 62.0], "dice": [50.0, 52.0, 54.0]})
    _publish(tmp_path, "b", "bf16", {"ce": [61.0, 64.0, 63.0], "dice": [40.0, 42.1, 44.0]})
    table = parity(load_trials("a", "fp32", tmp_path), load_trials("b", "bf16", tmp_path))
    ce, dice = (table.set_index("loss").loc[loss] for loss in ("ce", "dice"))
    # ce: differences 1, 0, 1 (mean 2/3, sd 0.577): 3.1 spreads ≈ 1.8 resolve, 2/3 is within.
    assert ce["delta"] == pytest.approx(2 / 3)
    assert ce["resolves"] == pytest.approx(1.80, abs=0.05)
    assert ce["within"]
    assert ce["low"] < 0 < ce["high"]
    # dice: differences -10, -9.9, -10: a tight, large loss of F1 is resolved.
    assert dice["delta"] == pytest.approx(-9.9667, abs=1e-3)
    assert not dice["within"]
    assert dice["p_value"] < 0.001
    assert ce["last_range"] == pytest.approx(0.6)
    assert ce["spread"] == pytest.approx(2.0)
    assert ce["steps"] == [920]


def test_a_side_of_several_shards_is_read_whole(tmp_path: Path) -> None:
    _publish(tmp_path, "a", "fp32", {"ce": [60.0, 64.0, 62.0]})
    _publish(tmp_path, "b0", "bf16", {"ce": [61.0]})
    _publish(tmp_path, "b1", "bf16", {"ce": [61.0, 64.0, 63.0]})
    shards = load_trials("b0,b1", "bf16", tmp_path)
    assert sorted(shards["eval_f1"]) == [61.0, 61.0, 63.0, 64.0]
    b1 = pd.read_csv(tmp_path / "b1-trials.csv")
    b1.iloc[1:].to_csv(tmp_path / "b1-trials.csv", index=False)  # seeds 1 and 2 left
    table = parity(load_trials("a", "fp32", tmp_path), load_trials("b0,b1", "bf16", tmp_path))
    assert table.set_index("loss").loc["ce", "delta"] == pytest.approx(2 / 3)


def test_a_trial_that_trained_in_another_precision_is_refused(tmp_path: Path) -> None:
    _publish(tmp_path, "b", "fp32", {"ce": [61.0, 64.0, 63.0]})
    with pytest.raises(ValueError, match=r"3 trial\(s\) trained in \['fp32'\], not bf16"):
        load_trials("b", "bf16", tmp_path)


def test_the_script_prints_the_table_without_writing_docs(tmp_path: Path) -> None:
    _publish(tmp_path, "a", "fp32", {"ce": [60.0, 64.0, 62.0]})
    _publish(tmp_path, "b", "bf16", {"ce": [61.0, 64.0, 63.0]})
    before = (ROOT / "docs" / "benchmarks.md").read_text()
    result = subprocess.run(
        [
            sys.executable,
            "benchmarks/bf16_parity.py",
            "--pair",
            "mrpc",
            "a",
            "b",
            "--results",
            str(tmp_path),
            "--no-docs",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "| mrpc | ce | 3 | 62.00 ± 2.00 | 62.67 ± 1.53 | +0.67" in result.stdout
    assert (ROOT / "docs" / "benchmarks.md").read_text() == before


def test_the_published_parity_table_is_the_one_the_csvs_give() -> None:
    """docs/benchmarks.md's bf16 section holds the table the published trials give, cell
    for cell: none is written by hand."""
    result = subprocess.run(
        [sys.executable, "benchmarks/bf16_parity.py", "--no-docs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    published = (ROOT / "docs" / "benchmarks.md").read_text()
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 7  # the header, ce and dice on two data sets, ce and dsc in MRC-NER
    for line in table:
        assert line in published


def test_the_readmes_mrc_ner_parity_figures_are_the_csvs() -> None:
    """docs/results/README.md quotes the MRC-NER parity cells: each figure as parity()
    gives it from the published trials."""
    from bf16_parity import PAIRS

    _, fp32, bf16 = next(pair for pair in PAIRS if pair[0] == "conll2003 (MRC-NER)")
    table = parity(load_trials(fp32, "fp32"), load_trials(bf16, "bf16")).set_index("loss")
    row = next(
        line
        for line in (ROOT / "docs" / "results" / "README.md").read_text().splitlines()
        if line.startswith("| **6, compared:")
    )

    def signed(value: float) -> str:
        return f"{value:+.2f}".replace("-", "−")

    for loss, name in (("ce", "ce"), ("dsc(alpha=0.01,scope=set,smooth=1,square=true)", "dsc")):
        line = table.loc[loss]
        shown = f"{name} {signed(line['delta'])}, {signed(line['low'])} to {signed(line['high'])}"
        assert shown in row
        assert line["within"] and line["p_value"] > 0.05
    reach = float(table[["low", "high"]].abs().to_numpy().max())
    assert f"{reach:.2f} in MRC-NER" in row
