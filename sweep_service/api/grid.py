"""A sweep's table (or several sweeps' merged) in the paper's layout, rendered in the
format a client asks for."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from enum import StrEnum

import pandas as pd
from fastapi import Response
from starlette.concurrency import run_in_threadpool

from search_spaces.reports import (
    METRICS,
    failed_trials,
    final_rows,
    infer_layout,
    paper_table,
    to_csv,
    to_json,
    to_latex,
    to_markdown,
    to_png,
    with_failures,
)
from search_spaces.reports.budget import with_budget_curves
from sweep_service.api.errors import ApiError

# stage: a table holds stage 2 only (final_rows).
NOT_GROUPABLE = frozenset({*METRICS, "status", "run_id", "failure_reason", "stop_reason", "stage"})
MAX_MERGED_SWEEPS = 20  # sweeps one merged table may hold


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


def finished_rows(rows: pd.DataFrame, subject: str) -> pd.DataFrame:
    """The trials whose runs finished, the only ones a table averages.

    Raises:
        ApiError: ``no_results`` when there are none yet, naming ``subject``
            (``"sweep 'sw-1'"``).
    """
    finished = rows[rows["status"] == "FINISHED"] if "status" in rows else rows.iloc[0:0]
    if finished.empty:
        raise ApiError("no_results", f"{subject} has no finished trials yet")
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
        ApiError: ``invalid_request`` naming the valid columns for an unknown key or
            metric, or the same key for rows and columns.
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
    random_sampling: bool = False,
) -> pd.DataFrame:
    """The table of the finished trials among ``trials`` (MLflow's rows of one sweep
    or several, ``subject`` in messages), titled ``title``, the failed ones listed.
    Stage-1 trials (``stage == "tune"``) are not in it: they give the budget curves it
    carries, read as random draws where ``random_sampling`` (``stage_one_is_random``).

    Raises:
        ApiError: ``no_results`` before any trial (of the final stage) finished; what
            ``build_table`` raises.
    """
    finished = finished_rows(trials, subject)
    reported = final_rows(finished)
    if reported.empty:
        raise ApiError("no_results", f"{subject} has no finished final-stage trials yet")
    table = build_table(reported, rows_key, cols_key, metric, title)
    table = with_budget_curves(table, finished, random_sampling)
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
        details = [
            {"loc": ["query", name], "msg": msg, "type": "value_error"} for name, msg in problems
        ]
        raise ApiError("invalid_request", details)


class PngRenderer:
    """Every PNG the API serves, drawn on one thread of its own, never on the request
    threads (a drawing takes 0.1-0.5 s of CPU: a burst of them held every request
    thread and slowed every other request to seconds), and kept by what it shows: a
    table, and so a sweep's state, drawn once is not drawn again; requests for the same
    one while it is being drawn share the drawing. At most ``max_waiting`` drawings
    wait their turn (more are refused, 503, rather than queued for minutes); at most
    ``max_kept`` are kept, the oldest dropped."""

    def __init__(self, max_kept: int = 64, max_waiting: int = 16) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="png-grid")
        self._kept: OrderedDict[str, Future[bytes]] = OrderedDict()
        self._max_kept = max_kept
        self._max_waiting = max_waiting
        self._lock = threading.Lock()
        self.drawn = 0  # how many drawings were started (/metrics-style tally)

    def png(self, table: pd.DataFrame) -> Future[bytes]:
        """The PNG of ``table``, kept or being drawn; a failed drawing is not kept.

        Raises:
            ApiError: ``renderer_busy`` when ``max_waiting`` drawings are not done yet.
        """
        key = hashlib.sha256(to_json(table).encode()).hexdigest()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and not (kept.done() and kept.exception() is not None):
                self._kept.move_to_end(key)
                return kept
            if sum(not drawing.done() for drawing in self._kept.values()) >= self._max_waiting:
                raise ApiError(
                    "renderer_busy",
                    f"{self._max_waiting} plots are being drawn; retry in a few seconds",
                    headers={"Retry-After": "2"},
                )
            self.drawn += 1
            drawing = self._pool.submit(to_png, table)
            self._kept[key] = drawing
            while len(self._kept) > self._max_kept:
                self._kept.popitem(last=False)
            return drawing


async def grid_response(table: pd.DataFrame, fmt: GridFormat, renderer: PngRenderer) -> Response:
    """``table`` in ``fmt``: a PNG from ``renderer`` (awaited, holding no request
    thread), the text formats rendered on the thread pool."""
    if fmt is GridFormat.PNG:
        content = await asyncio.wrap_future(renderer.png(table))
        return Response(content, media_type=MEDIA_TYPES[fmt])
    text = await run_in_threadpool(_TEXT_RENDERERS[fmt], table)
    return Response(text, media_type=MEDIA_TYPES[fmt])
