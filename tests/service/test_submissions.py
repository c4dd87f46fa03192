"""The submission writer: batches on one thread, each submission answered alone."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.api.submissions import SubmissionWriter
from sweep_service.store import (
    ConflictError,
    Owner,
    QuotaExceededError,
    Sweep,
    SweepRequest,
    create_owner,
    create_sweep,
)
from sweep_service.store import sweeps as sweeps_module
from tests.service.factories import make_draft


class GatedSessions:
    """A session factory whose first session waits for ``open()``: submissions sent
    meanwhile queue up behind the first, as they do behind a busy writer."""

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self.factory = factory
        self.gate = threading.Event()
        self.first_taken = threading.Event()
        self.commits = 0
        event.listen(factory.kw["bind"], "commit", self._count)

    def _count(self, _connection: object) -> None:
        self.commits += 1

    def __call__(self) -> Session:
        if not self.first_taken.is_set():
            self.first_taken.set()
            self.gate.wait(timeout=30)
        return self.factory()

    def open(self) -> None:
        self.gate.set()


@contextmanager
def writer_on(sessions: Callable[[], Session]) -> Iterator[SubmissionWriter]:
    writer = SubmissionWriter(sessions)
    try:
        yield writer
    finally:
        writer.close()


def _stored(factory: sessionmaker[Session]) -> list[str]:
    with factory() as session:
        return sorted(session.scalars(select(Sweep.name)))


def test_submissions_waiting_for_the_writer_are_stored_together(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    gated = GatedSessions(session_factory)

    async def submit_all() -> list[object]:
        with writer_on(gated) as writer:
            first = asyncio.ensure_future(writer.submit(SweepRequest(alice.id, make_draft("s0"))))
            while not gated.first_taken.is_set():
                await asyncio.sleep(0.01)
            rest = [
                asyncio.ensure_future(writer.submit(SweepRequest(alice.id, make_draft(f"s{n}"))))
                for n in range(1, 40)
            ]
            await asyncio.sleep(0.05)
            commits_before = gated.commits
            gated.open()
            outcomes = await asyncio.gather(first, *rest)
            return [commits_before, gated.commits, *outcomes]

    commits_before, commits_after, *outcomes = asyncio.run(submit_all())
    assert all(outcome.created for outcome in outcomes)  # type: ignore[attr-defined]
    assert len({outcome.sweep.id for outcome in outcomes}) == 40  # type: ignore[attr-defined]
    # The first alone, then the 39 that queued meanwhile in one transaction.
    assert commits_after - commits_before == 2
    assert _stored(session_factory) == sorted(f"s{n}" for n in range(40))


def test_a_refusal_reaches_only_its_own_caller(session_factory: sessionmaker[Session]) -> None:
    with session_factory() as session:
        owner_id = create_owner(session, "kim", max_trials_per_sweep=5).id
    gated = GatedSessions(session_factory)

    async def submit_all() -> list[object]:
        with writer_on(gated) as writer:
            drafts = [make_draft("ok-1"), make_draft("big", trials=6), make_draft("ok-2")]
            tasks = [
                asyncio.ensure_future(writer.submit(SweepRequest(owner_id, draft)))
                for draft in drafts
            ]
            gated.open()
            return await asyncio.gather(*tasks, return_exceptions=True)

    ok_1, big, ok_2 = asyncio.run(submit_all())
    assert isinstance(big, QuotaExceededError) and "6 trials" in str(big)
    assert ok_1.created and ok_2.created  # type: ignore[union-attr]
    assert _stored(session_factory) == ["ok-1", "ok-2"]


def test_a_batch_refused_by_a_unique_rule_is_stored_one_by_one(
    session_factory: sessionmaker[Session], alice: Owner, monkeypatch: pytest.MonkeyPatch
) -> None:
    with session_factory() as session:
        taken = create_sweep(session, alice.id, make_draft("first")).sweep.id
    # The blocker draws a1. The batch of three draws a2, taken, a4 and is refused;
    # alone, "one" draws b1, "two" the taken id again, "three" b3.
    ids = iter(["sw-a1", "sw-a2", taken, "sw-a4", "sw-b1", taken, "sw-b3"])
    monkeypatch.setattr(sweeps_module, "new_sweep_id", lambda: next(ids))
    gated = GatedSessions(session_factory)

    async def submit_all() -> list[object]:
        with writer_on(gated) as writer:
            blocker = asyncio.ensure_future(
                writer.submit(SweepRequest(alice.id, make_draft("blocker")))
            )
            while not gated.first_taken.is_set():
                await asyncio.sleep(0.01)
            tasks = [
                asyncio.ensure_future(writer.submit(SweepRequest(alice.id, make_draft(name))))
                for name in ("one", "two", "three")
            ]
            await asyncio.sleep(0.05)
            gated.open()
            return await asyncio.gather(blocker, *tasks, return_exceptions=True)

    blocker, one, two, three = asyncio.run(submit_all())
    assert blocker.sweep.id == "sw-a1"  # type: ignore[union-attr]
    assert isinstance(two, ConflictError)
    assert one.sweep.id == "sw-b1"  # type: ignore[union-attr]
    assert three.sweep.id == "sw-b3"  # type: ignore[union-attr]
    assert _stored(session_factory) == ["blocker", "first", "one", "three"]


def test_an_abandoned_submission_is_not_stored(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    gated = GatedSessions(session_factory)

    async def submit_and_abandon() -> None:
        with writer_on(gated) as writer:
            kept = asyncio.ensure_future(writer.submit(SweepRequest(alice.id, make_draft("kept"))))
            while not gated.first_taken.is_set():
                await asyncio.sleep(0.01)
            dropped = asyncio.ensure_future(
                writer.submit(SweepRequest(alice.id, make_draft("dropped")))
            )
            await asyncio.sleep(0.05)
            dropped.cancel()  # the client went away while its submission queued
            gated.open()
            await kept
            with pytest.raises(asyncio.CancelledError):
                await dropped

    asyncio.run(submit_and_abandon())
    assert _stored(session_factory) == ["kept"]


def test_a_failing_store_fails_its_batch_and_the_writer_goes_on(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    failures = iter([RuntimeError("the store is down")])

    def flaky() -> Session:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return session_factory()

    async def submit_twice() -> object:
        with writer_on(flaky) as writer:
            with pytest.raises(RuntimeError, match="the store is down"):
                await writer.submit(SweepRequest(alice.id, make_draft("lost")))
            return await writer.submit(SweepRequest(alice.id, make_draft("later")))

    assert asyncio.run(submit_twice()).created  # type: ignore[attr-defined]
    assert _stored(session_factory) == ["later"]


def test_a_closed_writer_refuses_new_submissions(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    writer = SubmissionWriter(session_factory)

    async def submit(name: str) -> object:
        return await writer.submit(SweepRequest(alice.id, make_draft(name)))

    assert asyncio.run(submit("before")).created  # type: ignore[attr-defined]
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(submit("after"))
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(Sweep)) == 1
