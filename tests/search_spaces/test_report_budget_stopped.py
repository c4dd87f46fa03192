"""The budget curves' notes say which stage-1 trials a scheduler stopped, where, and how
the estimator counts them (at their last score, not left out)."""

from __future__ import annotations

import pandas as pd
import pytest

from search_spaces.reports.budget import (
    budget_curves,
    budget_html,
    budget_lines,
    budget_markdown,
    with_budget_curves,
)


def _rows(stop_rung: bool) -> pd.DataFrame:
    """ce: five stage-1 trials, three stopped at the rung of 1 evaluation, one at
    the rung of 3, one to its end."""
    rows = pd.DataFrame(
        {
            "loss": ["ce"] * 5,
            "stage": ["tune"] * 5,
            "eval_f1": [60.0, 70.0, 83.0, 71.0, 50.0],
            "stop_reason": ["scheduler", "scheduler", "epochs", "scheduler", "scheduler"],
            "optimizer_steps": [16, 48, 64, 16, 16],
        }
    )
    if stop_rung:
        rows["stop_rung"] = [1, 3, None, 1, 1]
    return rows


def _table() -> pd.DataFrame:
    table = pd.DataFrame()
    table.attrs = {"metric": "eval_f1"}
    return table


def test_stopped_trials_count_at_their_last_score_and_the_notes_say_where() -> None:
    rows = _rows(stop_rung=True)
    # All five scores make the curve: the best of one draw is their mean.
    assert budget_curves(rows, "eval_f1")["mean"].iloc[0] == pytest.approx(334 / 5)
    table = with_budget_curves(_table(), rows, random_sampling=True)
    note = table.attrs["budget"]["stopped"]
    assert note.startswith("Stage-1 trials stopped by the scheduler: ce: 4 of 5 stopped")
    assert "(rung 1: 3, rung 3: 1)" in note
    assert "each at its last evaluation's score" in note
    assert note in budget_lines(table)
    assert note in budget_markdown(table)
    assert 'class="budget-stopped"' in budget_html(table)


def test_without_rungs_the_notes_give_the_steps_run() -> None:
    table = with_budget_curves(_table(), _rows(stop_rung=False), random_sampling=True)
    assert "(after 16 steps: 3, after 48 steps: 1)" in table.attrs["budget"]["stopped"]


def test_no_stopped_trial_no_note() -> None:
    rows = _rows(stop_rung=False).assign(stop_reason="epochs")
    table = with_budget_curves(_table(), rows, random_sampling=True)
    assert table.attrs["budget"]["stopped"] is None
    assert not any("stopped by the scheduler" in line for line in budget_lines(table))
