"""A sweep's table (built by ``sweep_service.tables``) rendered in the format a client
asks for, its PNGs drawn off the request threads."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import pandas as pd
from fastapi import Depends, Query, Response
from starlette.concurrency import run_in_threadpool

from search_spaces.plural import counted
from search_spaces.reports import to_json, to_png
from sweep_service.api.errors import ApiError, documented
from sweep_service.tables import TEXT_RENDERERS, grid_of

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


def table_responses(errors: Mapping[int, str]) -> dict[int | str, dict[str, Any]]:
    """A table route's OpenAPI ``responses``: each format's media type, and ``errors``."""
    content: dict[str, Any] = {media_type: {} for media_type in MEDIA_TYPES.values()}
    return {200: {"content": content}, **documented(errors)}


@dataclass(frozen=True)
class GridQuery:
    """A table route's query: the layout (``rows``, ``cols``; unset, the paper's), the
    metric, the format, and whether the paper's Δ stands beside each cell."""

    rows: Annotated[str | None, Query(description="e.g. loss or param_alpha")] = None
    cols: Annotated[str | None, Query(description="e.g. variant or dataset")] = None
    metric: str = "eval_f1"
    fmt: Annotated[GridFormat, Query(alias="format")] = GridFormat.JSON
    paper: Annotated[bool, Query(description="the paper's Δ beside each cell it reports")] = False

    def table(
        self, trials: pd.DataFrame, subject: str, title: str, random_sampling: bool | None
    ) -> pd.DataFrame:
        """``tables.grid_of`` over ``trials`` as this query asks; raises what it raises."""
        return grid_of(
            trials, subject, title, self.rows, self.cols, self.metric, random_sampling, self.paper
        )


GridQueryDep = Annotated[GridQuery, Depends()]


class PngRenderer:
    """Every PNG the API serves, drawn on one thread of its own, never on the request
    threads (a drawing takes 0.1-0.5 s of CPU: a burst of them there would hold every
    request thread), and kept by what it shows: a
    table, and so a sweep's state, drawn once is not drawn again; requests for the same
    one while it is being drawn share the drawing. At most ``max_waiting`` drawings
    wait their turn, and at most ``max_waiting_per_owner`` of one owner's, so one
    owner's burst cannot fill the queue for the others (more are refused, 503, rather
    than queued for minutes); at most ``max_kept`` are kept, the oldest dropped."""

    def __init__(
        self, max_kept: int = 64, max_waiting: int = 16, max_waiting_per_owner: int = 4
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="png-grid")
        self._kept: OrderedDict[str, Future[bytes]] = OrderedDict()
        self._asked_by: dict[str, str] = {}  # a kept drawing's key: the owner who asked
        self._max_kept = max_kept
        self._max_waiting = max_waiting
        self._max_waiting_per_owner = max_waiting_per_owner
        self._lock = threading.Lock()
        self.drawn = 0  # how many drawings were started (/metrics-style tally)

    def png(self, table: pd.DataFrame, owner: str = "") -> Future[bytes]:
        """The PNG of ``table`` for ``owner`` (its id), kept or being drawn; a failed drawing is
        not kept.

        Raises:
            ApiError: ``renderer_busy`` when ``max_waiting`` drawings, or
                ``max_waiting_per_owner`` of ``owner``'s, are not done yet.
        """
        key = hashlib.sha256(to_json(table).encode()).hexdigest()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and not (kept.done() and kept.exception() is not None):
                self._kept.move_to_end(key)
                return kept
            waiting = [k for k, drawing in self._kept.items() if not drawing.done()]
            yours = sum(self._asked_by.get(k) == owner for k in waiting)
            if len(waiting) >= self._max_waiting:
                busy = counted(len(waiting), "plot")
            elif yours >= self._max_waiting_per_owner:
                busy = f"{counted(yours, 'plot')} of yours"
            else:
                busy = ""
            if busy:
                raise ApiError(
                    "renderer_busy",
                    f"{busy} being drawn; retry in a few seconds",
                    headers={"Retry-After": "2"},
                )
            self.drawn += 1
            drawing = self._pool.submit(to_png, table)
            self._kept[key] = drawing
            self._asked_by[key] = owner
            while len(self._kept) > self._max_kept:
                dropped, _ = self._kept.popitem(last=False)
                self._asked_by.pop(dropped, None)
            return drawing


async def grid_response(
    table: pd.DataFrame, fmt: GridFormat, renderer: PngRenderer, owner: str
) -> Response:
    """``table`` in ``fmt``: a PNG ``owner`` asked ``renderer`` for (awaited, holding no
    request thread), the text formats rendered on the thread pool."""
    if fmt is GridFormat.PNG:
        content = await asyncio.wrap_future(renderer.png(table, owner))
        return Response(content, media_type=MEDIA_TYPES[fmt])
    text = await run_in_threadpool(TEXT_RENDERERS[fmt.value], table)
    return Response(text, media_type=MEDIA_TYPES[fmt])
