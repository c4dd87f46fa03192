"""A sweep's table (or several sweeps' merged) from its trial rows, in the paper's
layout: the one pipeline behind ``GET /v1/sweeps/{id}/grid``, ``GET /v1/grid``, the
sweep's page and ``dicesweep grid``. No FastAPI here: ``dicesweep grid`` runs where
only the train extra is installed; the API maps the errors below to its codes."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from search_spaces.reports import (
    METRICS,
    failed_trials,
    final_rows,
    infer_layout,
    paper_table,
    to_csv,
    to_html,
    to_json,
    to_latex,
    to_markdown,
    with_failures,
)
from search_spaces.reports.budget import with_budget_curves
from search_spaces.reports.paper_beside import with_paper

# stage: a table holds stage 2 only (final_rows).
NOT_GROUPABLE = frozenset(
    {*METRICS, "status", "run_id", "failure_reason", "stop_reason", "stop_rung", "stage"}
)

# A table as text, by format name (PNG is drawn by ``search_spaces.reports.to_png``).
TEXT_RENDERERS: dict[str, Callable[[pd.DataFrame], str]] = {
    "json": to_json,
    "csv": to_csv,
    "markdown": to_markdown,
    "latex": to_latex,
    "html": to_html,
}


class NoResultsError(LookupError):
    """No trial (of the final stage) has finished yet: there is nothing to average."""


class GridQueryError(ValueError):
    """A ``rows``, ``cols`` or ``metric`` the trials cannot be grouped or scored by;
    ``problems``: ``(field, message)`` pairs, each message listing the valid ones."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))
        self.problems = problems


def finished_rows(rows: pd.DataFrame, subject: str) -> pd.DataFrame:
    """The trials whose runs finished, the only ones a table averages.

    Raises:
        NoResultsError: there are none yet; the message names ``subject``
            (``"sweep 'sw-1'"``).
    """
    finished = rows[rows["status"] == "FINISHED"] if "status" in rows else rows.iloc[0:0]
    if finished.empty:
        raise NoResultsError(f"{subject} has no finished trials yet")
    return finished


def build_table(
    rows: pd.DataFrame,
    rows_key: str | None,
    cols_key: str | None,
    metric: str,
    title: str | None = None,
) -> pd.DataFrame:
    """``paper_table`` of ``rows`` (finished trials): mean, std and count over seeds,
    the delta against ``ce`` with the paired tests' marks where the rows are losses
    holding it; unset keys take the paper's layout; ``title`` names the sweep(s).

    Raises:
        GridQueryError: an unknown key or metric (naming the valid columns), or the
            same key for rows and columns.
    """
    inferred_rows, inferred_cols, _ = infer_layout(rows)
    rows_key, cols_key = rows_key or inferred_rows, cols_key or inferred_cols
    _check_columns(rows, rows_key, cols_key, metric)
    return paper_table(rows, metric, rows_key, cols_key, title=title)


def grid_of(
    trials: pd.DataFrame,
    subject: str,
    title: str,
    rows_key: str | None = None,
    cols_key: str | None = None,
    metric: str = "eval_f1",
    random_sampling: bool | None = False,
    paper: bool = False,
) -> pd.DataFrame:
    """The table of the finished trials among ``trials`` (MLflow's rows of one sweep
    or several, ``subject`` in messages), titled ``title``, the failed ones listed.
    Stage-1 trials (``stage == "tune"``) are not in it: they give the budget curves it
    carries, read as random draws where ``random_sampling`` (``stage_one_is_random``;
    None: unknown, which the text says). With ``paper``, the paper's Δ beside each
    cell it reports (``reports.paper_beside``).

    Raises:
        NoResultsError: before any trial (of the final stage) finished.
        GridQueryError: what ``build_table`` raises.
    """
    finished = finished_rows(trials, subject)
    reported = final_rows(finished)
    if reported.empty:
        raise NoResultsError(f"{subject} has no finished final-stage trials yet")
    table = build_table(reported, rows_key, cols_key, metric, title)
    table = with_budget_curves(table, finished, random_sampling)
    if paper:
        table = with_paper(table, reported)
    return with_failures(table, failed_trials(trials))


def _check_columns(rows: pd.DataFrame, rows_key: str, cols_key: str, metric: str) -> None:
    groupable = sorted(column for column in rows.columns if column not in NOT_GROUPABLE)
    metrics = [name for name in METRICS if name in rows.columns and rows[name].notna().any()]
    problems = []
    for name, value, valid in (("rows", rows_key, groupable), ("cols", cols_key, groupable)):
        if value not in valid:
            problems.append((name, f"unknown column {value!r}; valid: {', '.join(valid)}"))
    if rows_key == cols_key:
        problems.append(("cols", f"rows and cols are both {rows_key!r}; pick two columns"))
    if metric not in metrics:
        problems.append(("metric", f"unknown metric {metric!r}; valid: {', '.join(metrics)}"))
    if problems:
        raise GridQueryError(problems)
