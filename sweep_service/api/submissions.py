"""The API's submissions, stored by one writer thread, a batch per transaction.

A store has one writer at a time (SQLite's write lock; the owner's row lock on
PostgreSQL), so submissions handled on many threads only queue for it, each paying
for its own transaction and for the threads' contention. Here every submission of
the process goes to one thread instead, which stores those that arrived while it was
committing the last batch together, in one transaction (``create_sweeps``): each is
checked alone and answered alone, and the transaction, the owners' locks and the
insert are shared.

A batch that a unique rule refuses as a whole (a generated id taken, or an
``Idempotency-Key`` another process stored meanwhile) is stored again one submission
at a time, so each gets its own answer. A submission whose request was abandoned
before its batch started is dropped, not stored.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from sqlalchemy.orm import Session

from sweep_service.store import (
    ConflictError,
    StoreError,
    Submission,
    SweepRequest,
    create_sweeps,
)

log = logging.getLogger(__name__)

MAX_BATCH = 64  # submissions per transaction, at most
_STOP = None

_Pending = tuple[SweepRequest, "Future[Submission]"]


class SubmissionWriter:
    """Stores sweep submissions through ``session_factory`` on a thread of its own,
    started on first use; ``close`` stops it once the queue is done."""

    def __init__(
        self, session_factory: Callable[[], Session], *, max_batch: int = MAX_BATCH
    ) -> None:
        self._sessions = session_factory
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    async def submit(self, request: SweepRequest) -> Submission:
        """Store ``request`` (see ``create_sweep``) with the next batch.

        Raises:
            StoreError: what ``create_sweep`` raises for it; nothing was stored.
            RuntimeError: the writer is closed.
        """
        future: Future[Submission] = Future()
        self._enqueue((request, future))
        return await asyncio.wrap_future(future)

    def close(self, timeout_s: float = 30.0) -> None:
        """Store what is queued, then stop the thread (waiting up to ``timeout_s``)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout_s)

    def _enqueue(self, pending: _Pending) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the submission writer is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dicesweep-submissions", daemon=True
                )
                self._thread.start()
            self._queue.put(pending)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch = [first]
            stop = False
            while len(batch) < self._max_batch:
                try:
                    pending = self._queue.get_nowait()
                except queue.Empty:
                    break
                if pending is _STOP:
                    stop = True
                    break
                batch.append(pending)
            self._store([pending for pending in batch if pending[1].set_running_or_notify_cancel()])
            if stop:
                return

    def _store(self, batch: Sequence[_Pending]) -> None:
        if not batch:
            return
        try:
            outcomes = self._outcomes([request for request, _ in batch])
        except Exception as error:  # the store itself failed: every submission hears it
            log.exception("storing %d submissions failed", len(batch))
            for _, future in batch:
                future.set_exception(error)
            return
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, StoreError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def _outcomes(self, requests: list[SweepRequest]) -> list[Submission | StoreError]:
        try:
            with self._sessions() as session:
                return create_sweeps(session, requests)
        except ConflictError as conflict:
            if len(requests) == 1:
                return [conflict]
        # One request's unique rule refused the whole batch: each alone, its own answer.
        outcomes: list[Submission | StoreError] = []
        for request in requests:
            try:
                with self._sessions() as session:
                    outcomes.extend(create_sweeps(session, [request]))
            except ConflictError as conflict:
                outcomes.append(conflict)
        return outcomes
