"""The resolvable difference with its uncertainty (docs/sweeps.md, "Each Δ's interval,
the marks, and what the seeds detect"), against values computed by hand: with 2
degrees of freedom χ² has the closed form ``ppf(p) = −2·ln(1 − p)``, and t's quantiles
are scipy's."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from scipy import stats

from search_spaces.reports import paper_table, to_html, to_json, to_markdown
from search_spaces.reports.resolution import (
    resolution_text,
    resolvable_difference,
    resolvable_range,
)

# k = 3 seeds: χ²(0.975, 2) = −2 ln 0.025 and χ²(0.025, 2) = −2 ln 0.975.
LOW_FACTOR = math.sqrt(2 / (-2 * math.log(0.025)))  # 0.5207
HIGH_FACTOR = math.sqrt(2 / (-2 * math.log(0.975)))  # 6.2847
PER_SPREAD = (stats.t.ppf(0.975, 2) + stats.t.ppf(0.80, 2)) / math.sqrt(3)  # 3.0966


def test_three_seeds_give_a_factor_of_0_52_to_6_3() -> None:
    assert pytest.approx(0.5207, abs=1e-4) == LOW_FACTOR
    assert pytest.approx(6.2847, abs=1e-4) == HIGH_FACTOR
    assert resolvable_difference(1.0, 3) == pytest.approx(PER_SPREAD)
    low, high = resolvable_range(1.0, 3)
    assert low == pytest.approx(PER_SPREAD * LOW_FACTOR, rel=1e-9)
    assert high == pytest.approx(PER_SPREAD * HIGH_FACTOR, rel=1e-9)


def test_ten_seeds_narrow_it_to_0_69_to_1_8() -> None:
    figure = resolvable_difference(0.5, 10)
    low, high = resolvable_range(0.5, 10)
    assert (low / figure, high / figure) == pytest.approx((0.688, 1.826), abs=1e-3)


def test_fewer_than_two_pairs_resolve_nothing() -> None:
    assert math.isnan(resolvable_difference(1.0, 1))
    assert all(math.isnan(value) for value in resolvable_range(1.0, 1))


def test_the_issue_example_reads_as_a_range() -> None:
    spread = 0.16 / PER_SPREAD  # a test that resolves 0.16
    low, high = resolvable_range(spread, 3)
    assert resolution_text(resolvable_difference(spread, 3), low, high) == (
        "0.16, plausibly 0.08–1.01"
    )
    assert resolution_text(0.16, math.nan, math.nan) == "0.16"


def test_the_table_notes_carry_the_range() -> None:
    """Differences 0.1, 0.2, 0.0 over three seeds: spread 0.1, so 0.31 (0.16–1.95)."""
    rows = pd.DataFrame(
        [
            {"loss": loss, "loss_name": loss, "dataset": "mrpc", "variant": "original"}
            | {"seed": seed, "eval_f1": value}
            for loss, values in (("ce", (80.0, 81.0, 82.0)), ("dice", (80.1, 81.2, 82.0)))
            for seed, value in enumerate(values)
        ]
    )
    table = paper_table(rows)
    figure = 0.1 * PER_SPREAD
    assert table.attrs["resolvable"][("dice", "mrpc")] == pytest.approx(figure)
    assert table.attrs["resolvable_range"][("dice", "mrpc")] == pytest.approx(
        (figure * LOW_FACTOR, figure * HIGH_FACTOR)
    )
    assert "80% power" in to_markdown(table) and "not evidence of its own" in to_markdown(table)
    assert "dice 0.31, plausibly 0.16–1.95." in to_markdown(table)
    assert "dice 0.31, plausibly 0.16–1.95." in to_html(table)
    (cell,) = [c for c in json.loads(to_json(table))["cells"] if c["row"] == "dice"]
    assert cell["resolvable_range"] == pytest.approx([figure * LOW_FACTOR, figure * HIGH_FACTOR])
