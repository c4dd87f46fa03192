"""Submitting sweeps: idempotent retries, owner isolation, quotas, nothing half-created."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from search_spaces.resolve import Resolved, resolve_spec, trial_count
from sweep_service.store import (
    ConflictError,
    IdempotencyMismatchError,
    InvalidArgumentError,
    NotFoundError,
    Owner,
    QuotaExceededError,
    StoreError,
    Sweep,
    SweepDraft,
    SweepStatus,
    committing,
    count_active_sweeps,
    create_owner,
    create_sweep,
    get_sweep,
    list_sweeps,
    transition_sweep,
)
from sweep_service.store import sweeps as sweeps_module
from sweep_service.store.owners import lock_owner
from tests.service.factories import make_draft

T = TypeVar("T")


def _sweep_count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Sweep)) or 0


def test_a_new_sweep_is_pending_with_its_spec(session: Session, alice: Owner) -> None:
    spec = resolve_spec({"extends": "smoke"})
    draft = SweepDraft.from_spec({"extends": "smoke"}, Resolved(spec, trial_count(spec)))
    sweep, created = create_sweep(session, alice.id, draft)
    assert created
    assert sweep.id.startswith("sw-")
    assert sweep.status is SweepStatus.PENDING
    assert (sweep.name, sweep.preset, sweep.trial_count, sweep.gpus_per_trial) == (
        "smoke",
        "smoke",
        2,
        0.0,
    )
    session.expire_all()
    stored = get_sweep(session, alice.id, sweep.id)
    assert stored.spec == {"extends": "smoke"}
    assert stored.resolved_spec == spec.model_dump(mode="json")
    assert stored.resubmissions == 0
    assert stored.started_at is None and stored.finished_at is None


def test_a_retry_with_the_same_key_and_spec_returns_the_first_sweep(
    session: Session, alice: Owner
) -> None:
    first = create_sweep(session, alice.id, make_draft(), idempotency_key="retry-1")
    # The same spec with its keys in another order is the same submission.
    reordered = make_draft(spec={"name": "sweep", "extends": "smoke"})
    again = create_sweep(session, alice.id, reordered, idempotency_key="retry-1")
    assert first.created and not again.created
    assert again.sweep.id == first.sweep.id
    assert _sweep_count(session) == 1


def test_the_same_key_with_another_spec_is_a_mismatch(session: Session, alice: Owner) -> None:
    create_sweep(session, alice.id, make_draft("one"), idempotency_key="k")
    with pytest.raises(IdempotencyMismatchError) as caught:
        create_sweep(session, alice.id, make_draft("two"), idempotency_key="k")
    assert caught.value.code == "idempotency_mismatch"
    assert isinstance(caught.value, ConflictError)
    assert _sweep_count(session) == 1


def test_owners_may_use_the_same_key_and_no_key_never_deduplicates(
    session: Session, alice: Owner, bob: Owner
) -> None:
    of_alice = create_sweep(session, alice.id, make_draft(), idempotency_key="k").sweep
    of_bob = create_sweep(session, bob.id, make_draft(), idempotency_key="k").sweep
    assert of_alice.id != of_bob.id
    create_sweep(session, alice.id, make_draft())
    create_sweep(session, alice.id, make_draft())
    assert _sweep_count(session) == 4


@pytest.mark.parametrize("key", ["", "k" * 256])
def test_empty_or_overlong_idempotency_keys_are_invalid(
    session: Session, alice: Owner, key: str
) -> None:
    with pytest.raises(InvalidArgumentError, match="Idempotency-Key"):
        create_sweep(session, alice.id, make_draft(), idempotency_key=key)
    assert create_sweep(session, alice.id, make_draft(), idempotency_key="k" * 255).created


def test_an_owner_sees_only_its_own_sweeps(session: Session, alice: Owner, bob: Owner) -> None:
    of_alice = create_sweep(session, alice.id, make_draft()).sweep
    create_sweep(session, bob.id, make_draft())
    with pytest.raises(NotFoundError, match=of_alice.id) as caught:
        get_sweep(session, bob.id, of_alice.id)
    assert caught.value.code == "not_found"
    with pytest.raises(NotFoundError):
        get_sweep(session, alice.id, "sw-does-not-exist")
    assert [sweep.id for sweep in list_sweeps(session, alice.id).items] == [of_alice.id]
    assert count_active_sweeps(session, alice.id) == 1
    with pytest.raises(NotFoundError):
        transition_sweep(session, "sw-does-not-exist", SweepStatus.SUBMITTED)


def test_a_sweep_for_an_unknown_owner_is_not_found(session: Session) -> None:
    with pytest.raises(NotFoundError):
        create_sweep(session, 999, make_draft())
    assert _sweep_count(session) == 0


def test_quotas_on_trials_and_gpus_per_trial(session: Session) -> None:
    owner = create_owner(session, "gina", max_trials_per_sweep=10, max_gpus_per_trial=0.5)
    with pytest.raises(QuotaExceededError, match="11 trials") as caught:
        create_sweep(session, owner.id, make_draft(trials=11))
    assert caught.value.code == "quota_exceeded"
    with pytest.raises(QuotaExceededError, match="GPUs per trial"):
        create_sweep(session, owner.id, make_draft(gpus_per_trial=1.0))
    assert create_sweep(session, owner.id, make_draft(trials=10, gpus_per_trial=0.5)).created
    assert _sweep_count(session) == 1


def test_the_concurrency_quota_counts_active_sweeps(session: Session) -> None:
    owner = create_owner(session, "hana", max_concurrent_sweeps=2)
    first = create_sweep(session, owner.id, make_draft(), idempotency_key="a").sweep
    create_sweep(session, owner.id, make_draft())
    with pytest.raises(QuotaExceededError, match="2 sweeps are active"):
        create_sweep(session, owner.id, make_draft())
    # A retry of a stored submission is not a new sweep, so the quota does not apply.
    assert create_sweep(session, owner.id, make_draft(), idempotency_key="a").sweep.id == first.id
    transition_sweep(session, first.id, SweepStatus.CANCELLED)
    assert create_sweep(session, owner.id, make_draft()).created


def test_a_colliding_id_is_a_conflict_with_nothing_written(
    session: Session, alice: Owner, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = create_sweep(session, alice.id, make_draft("first")).sweep.id
    monkeypatch.setattr(sweeps_module, "new_sweep_id", lambda: taken)
    with pytest.raises(ConflictError) as caught:
        create_sweep(session, alice.id, make_draft("second"), idempotency_key="k")
    assert caught.value.code == "conflict"
    monkeypatch.undo()
    # The session was rolled back and is usable; the failed submission left no row.
    assert session.scalars(select(Sweep.name)).all() == ["first"]
    assert create_sweep(session, alice.id, make_draft("second"), idempotency_key="k").created


def _race(factory: sessionmaker[Session], count: int, submit: Callable[[Session], T]) -> list[T]:
    """Run ``submit`` in ``count`` threads at once, each with its own session; the
    results in any order, a StoreError counting as a result."""
    barrier = threading.Barrier(count)
    results: list[T] = []
    failures: list[BaseException] = []

    def run() -> None:
        with factory() as session:
            barrier.wait()
            try:
                results.append(submit(session))
            except StoreError as error:
                results.append(error)  # type: ignore[arg-type]
            except BaseException as error:
                failures.append(error)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not failures, failures
    return results


def test_concurrent_retries_create_one_sweep(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    results = _race(
        session_factory,
        4,
        lambda session: create_sweep(session, alice.id, make_draft(), idempotency_key="same"),
    )
    assert len({result.sweep.id for result in results}) == 1
    assert sorted(result.created for result in results) == [False, False, False, True]
    with session_factory() as session:
        assert _sweep_count(session) == 1


def test_concurrent_submissions_respect_the_concurrency_quota(
    session_factory: sessionmaker[Session],
) -> None:
    with session_factory() as session:
        owner_id = create_owner(session, "ivan", max_concurrent_sweeps=2).id
    results = _race(
        session_factory, 5, lambda session: create_sweep(session, owner_id, make_draft())
    )
    refused = [result for result in results if isinstance(result, QuotaExceededError)]
    assert len(refused) == 3
    with session_factory() as session:
        assert count_active_sweeps(session, owner_id) == 2


def test_reads_go_on_while_a_writer_holds_its_lock(
    session_factory: sessionmaker[Session], alice: Owner
) -> None:
    with session_factory() as session:
        sweep = create_sweep(session, alice.id, make_draft()).sweep
    with session_factory() as writer, session_factory() as reader:
        with committing(writer):
            lock_owner(writer, alice.id)  # SQLite: the write lock; PostgreSQL: the row
            writer.add(sweep_in_flight := Sweep(**_copy_of(sweep, "sw-in-flight")))
            writer.flush()
            # A reader sees the last committed state at once, without waiting.
            assert get_sweep(reader, alice.id, sweep.id).id == sweep.id
            assert _sweep_count(reader) == 1
            reader.commit()
        assert get_sweep(reader, alice.id, sweep_in_flight.id).id == "sw-in-flight"


def _copy_of(sweep: Sweep, new_id: str) -> dict[str, object]:
    columns = {column.key: getattr(sweep, column.key) for column in Sweep.__table__.columns}
    return {**columns, "id": new_id, "idempotency_key": None}
