"""The trial logger's writes, made in order on a thread of their own and carried
through an outage of the tracking store.

Tune's hooks only queue the writes (``WriteQueue.later``), so Tune's loop never waits
for the store. A write that fails is tried again, with a growing pause, while the
store is away (up to ``outage_s``; the writes after it wait their turn), so an outage
delays metrics rather than dropping them; a write the store refuses (HTTP 4xx) is
logged and dropped at once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def refused(error: Exception) -> bool:
    """Whether the tracking store answered a write with a refusal (HTTP 4xx: a bad
    value, a deleted run), which no retry changes, rather than being away."""
    status = getattr(error, "get_http_status_code", None)
    return callable(status) and 400 <= int(status()) < 500


class WriteQueue:
    """Writes (callables) made one at a time, in the order queued, by one daemon thread
    named ``name``, started on first use; each failing write tried again for
    ``outage_s`` seconds at most."""

    def __init__(self, outage_s: float, name: str = "trial-logger") -> None:
        self.outage_s = outage_s
        self.name = name
        self._writes: queue.Queue[Callable[[], object]] | None = None
        self._guard = threading.Lock()

    def later(self, write: Callable[[], object]) -> None:
        """Queue ``write`` for the queue's thread (started on first use)."""
        with self._guard:
            if self._writes is None:
                self._writes = queue.Queue()
                worker = threading.Thread(
                    target=self._write_all, args=(self._writes,), name=self.name, daemon=True
                )
                worker.start()
        self._writes.put(write)

    def flush(self) -> None:
        """Wait until every queued write has been made (or has failed and been logged)."""
        if self._writes is not None:
            self._writes.join()

    def _write_all(self, writes: queue.Queue[Callable[[], object]]) -> None:
        while True:
            write = writes.get()
            try:
                self._write_through_outage(write)
            finally:
                writes.task_done()

    def _write_through_outage(self, write: Callable[[], object]) -> None:
        """``write()``, tried again while the tracking store fails, for ``outage_s`` at
        most (then it is given up: the trial logger's ``backfill`` writes what it held
        at the end)."""
        failed_since = None
        pause = 1.0
        while True:
            try:
                write()
            except Exception as error:  # the tracking store failed: the trials go on
                if refused(error):  # asking again gets the same answer
                    log.exception("MLflow refused a write of the sweep's trial runs")
                    return
                now = time.monotonic()
                if failed_since is None:
                    failed_since = now
                    log.warning("MLflow write failed, trying again until it answers: %s", error)
                if now - failed_since >= self.outage_s:
                    log.exception("an MLflow write of the sweep's trial runs was given up")
                    return
                time.sleep(pause)
                pause = min(pause * 2, 30.0)
            else:
                if failed_since is not None:
                    log.warning(
                        "MLflow answers again after %.0f s", time.monotonic() - failed_since
                    )
                return
