"""A sweep's table (built by ``sweep_service.tables``) rendered in the format a client
asks for, its PNGs drawn off the request threads."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from enum import StrEnum

import pandas as pd
from fastapi import Response
from starlette.concurrency import run_in_threadpool

from search_spaces.reports import to_json, to_png
from sweep_service.api.errors import ApiError
from sweep_service.tables import TEXT_RENDERERS

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
    text = await run_in_threadpool(TEXT_RENDERERS[fmt.value], table)
    return Response(text, media_type=MEDIA_TYPES[fmt])
