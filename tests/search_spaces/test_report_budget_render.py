"""The budget curves under a two-stage sweep's table in every format, from rows shaped
as a two-stage sweep's (``stage``, ``loss``, ``eval_f1``, ``tuned_learning_rate``), and
nothing added to a sweep without stage-1 rows."""

from __future__ import annotations

import io
import json
import struct

import pandas as pd
import pytest

from search_spaces.reports import (
    final_rows,
    paper_table,
    to_html,
    to_json,
    to_latex,
    to_markdown,
    to_png,
    with_budget_curves,
)
from tests.stage_rows import STAGE_ONE, STAGE_TWO, two_stage_rows

# dsc's curve crosses ce's at 5 trials, by 0.23 points against stds of 0.24 and 4.81:
# within the spread of the bests, so the reading claims no lead.
READING = "dsc and ce differ by less than 2 stds of their bests at every budget (1–6 trials)"


def _table(rows: pd.DataFrame, random_sampling: bool = True) -> pd.DataFrame:
    table = paper_table(final_rows(rows), "eval_f1", title="two-stage")
    return with_budget_curves(table, rows, random_sampling)


def _png_height(png: bytes) -> int:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return int(struct.unpack(">II", png[16:24])[1])


def test_the_table_averages_stage_two_only() -> None:
    table = _table(two_stage_rows())
    assert table.at["ce", ("mrpc", "count")] == 3
    assert table.at["dsc", ("mrpc", "mean")] == pytest.approx(sum(STAGE_TWO["dsc"]) / 3)


def test_the_curves_cross_at_5_trials_within_their_spread() -> None:
    budget = _table(two_stage_rows()).attrs["budget"]
    # By hand, weights w_i = ((i/6)^n - ((i-1)/6)^n) over the sorted scores:
    # n = 4 (weights 1, 15, 65, 175, 369, 671 / 1296): ce 110519.8/1296 = 85.28,
    #   dsc 109492/1296 = 84.48: ce still ahead;
    # n = 5 (weights 1, 31, 211, 781, 2101, 4651 / 7776): ce 663567.2/7776 = 85.34,
    #   dsc 665394/7776 = 85.57: dsc ahead, and from then on.
    means = {(c["curve"], c["trials"]): c["mean"] for c in budget["curves"]}
    assert means["ce", 1] == pytest.approx(sum(STAGE_ONE["ce"]) / 6)
    assert means["dsc", 1] == pytest.approx(sum(STAGE_ONE["dsc"]) / 6)
    assert means["ce", 4] == pytest.approx(110519.8 / 1296)
    assert means["dsc", 4] == pytest.approx(109492 / 1296)
    assert means["ce", 5] == pytest.approx(663567.2 / 7776)
    assert means["dsc", 5] == pytest.approx(665394 / 7776)
    assert budget["reading"] == f"{READING}: not resolved."


def test_markdown_shows_the_curves_table_and_the_reading_under_the_table() -> None:
    text = to_markdown(_table(two_stage_rows()))
    table_end = text.index("Budget curves:")
    assert "| loss" in text[:table_end]
    curves = text[table_end:]
    assert "|   trials | ce" in curves and "| dsc" in curves
    assert len([line for line in curves.splitlines() if line.startswith("|")]) == 2 + 6
    assert f"Reading: {READING}: not resolved." in curves
    assert "estimator assumes random sampling" not in curves


def test_a_grid_stage_one_says_the_estimator_assumes_random_sampling() -> None:
    table = _table(two_stage_rows(), random_sampling=False)
    for text in (to_markdown(table), to_html(table), to_latex(table)):
        assert "Stage 1 ran a grid, not random draws: the estimator assumes random sampling" in text
    assert json.loads(to_json(table))["budget"]["random_sampling"] is False


def test_html_latex_and_json_carry_the_curves() -> None:
    table = _table(two_stage_rows())
    html = to_html(table)
    assert '<table class="grid budget">' in html
    curves = html[html.index('<section class="budget">') :]
    assert curves.count("<tr><th>") == 1 + 6  # the head, then one line per budget
    assert "<tr><th>5</th><td>85.34 ± 0.24</td><td>85.57 ± 4.81</td></tr>" in curves
    assert f'<p class="budget-reading">{READING}: not resolved.</p>' in html
    assert f"% Reading: {READING}: not resolved." in to_latex(table)
    budget = json.loads(to_json(table))["budget"]
    assert budget["metric"] == "eval_f1"
    assert [c["trials"] for c in budget["curves"]] == [1, 2, 3, 4, 5, 6] * 2


def test_the_png_draws_the_curves_below_the_table() -> None:
    rows = two_stage_rows()
    plain = paper_table(final_rows(rows), "eval_f1", title="two-stage")
    with_curves = _table(rows)
    assert _png_height(to_png(with_curves)) > _png_height(to_png(plain)) + 300


def test_without_stage_one_rows_every_format_is_unchanged() -> None:
    final = final_rows(two_stage_rows())
    for rows in (final, final.drop(columns="stage")):
        plain = paper_table(rows, "eval_f1", title="two-stage")
        table = with_budget_curves(paper_table(rows, "eval_f1", title="two-stage"), rows, True)
        assert to_markdown(table) == to_markdown(plain)
        assert to_html(table) == to_html(plain)
        assert to_latex(table) == to_latex(plain)
        assert to_json(table) == to_json(plain)
        assert "Budget" not in to_markdown(table)
        assert io.BytesIO(to_png(table)).getvalue() == to_png(plain)
