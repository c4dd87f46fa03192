"""A sweep's table in the paper's layout, rendered in the format a client asks for."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import pandas as pd

from search_spaces.reports import (
    METRICS,
    infer_layout,
    pivot_table,
    to_csv,
    to_json,
    to_latex,
    to_markdown,
    to_png,
)
from sweep_service.api.errors import ApiError

NOT_GROUPABLE = frozenset({*METRICS, "status", "run_id", "failure_reason"})


class GridFormat(StrEnum):
    """The formats a table is rendered in."""

    JSON = "json"
    CSV = "csv"
    MARKDOWN = "markdown"
    LATEX = "latex"
    PNG = "png"


MEDIA_TYPES: dict[GridFormat, str] = {
    GridFormat.JSON: "application/json",
    GridFormat.CSV: "text/csv; charset=utf-8",
    GridFormat.MARKDOWN: "text/markdown; charset=utf-8",
    GridFormat.LATEX: "application/x-latex; charset=utf-8",
    GridFormat.PNG: "image/png",
}
_TEXT_RENDERERS: dict[GridFormat, Callable[[pd.DataFrame], str]] = {
    GridFormat.JSON: to_json,
    GridFormat.CSV: to_csv,
    GridFormat.MARKDOWN: to_markdown,
    GridFormat.LATEX: to_latex,
}


def finished_rows(rows: pd.DataFrame, sweep_id: str) -> pd.DataFrame:
    """The trials whose runs finished, the only ones a table averages.

    Raises:
        ApiError: ``no_results`` when there are none yet.
    """
    finished = rows[rows["status"] == "FINISHED"]
    if finished.empty:
        raise ApiError("no_results", f"sweep {sweep_id!r} has no finished trials yet")
    return finished


def build_table(
    rows: pd.DataFrame, rows_key: str | None, cols_key: str | None, metric: str
) -> pd.DataFrame:
    """``pivot_table`` of ``rows``: mean, std and count over seeds and the delta against
    ``ce``. Unset keys take the paper's layout (``infer_layout``); the baseline is ``ce``
    when the rows are losses and ``ce`` is one of them.

    Raises:
        ApiError: ``invalid_request`` naming the valid columns for an unknown key or
            metric, or the same key for rows and columns.
    """
    inferred_rows, inferred_cols, _ = infer_layout(rows)
    rows_key, cols_key = rows_key or inferred_rows, cols_key or inferred_cols
    _check_columns(rows, rows_key, cols_key, metric)
    baseline = "ce" if rows_key == "loss" and "ce" in set(rows["loss"]) else None
    return pivot_table(rows, rows_key, cols_key, metric=metric, baseline=baseline)


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
        details = [
            {"loc": ["query", name], "msg": msg, "type": "value_error"} for name, msg in problems
        ]
        raise ApiError("invalid_request", details)


def render(table: pd.DataFrame, fmt: GridFormat) -> tuple[bytes, str]:
    """``table`` in ``fmt`` and its media type. PNG draws a heatmap, or lines against a
    loss parameter when the rows are one (Table 10's kind)."""
    if fmt is GridFormat.PNG:
        if str(table.attrs["rows_key"]).startswith("param_"):
            return to_png(table, kind="line"), MEDIA_TYPES[fmt]
        return to_png(table, kind="heatmap"), MEDIA_TYPES[fmt]
    return _TEXT_RENDERERS[fmt](table).encode(), MEDIA_TYPES[fmt]
