"""A sweep's life in the store: status changes, resubmissions, the reconciler's list, pages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.store import (
    InvalidArgumentError,
    InvalidTransitionError,
    Owner,
    ResubmissionLimitError,
    Sweep,
    SweepStatus,
    TrialProgress,
    create_sweep,
    list_active_sweeps,
    list_sweeps,
    list_unsynced_finished_sweeps,
    record_progress,
    record_resubmission,
    transition_sweep,
)
from sweep_service.store import pages as pages_module
from sweep_service.store.models import ACTIVE_STATUSES, FINISHED_STATUSES
from tests.service.factories import make_draft

S = SweepStatus
T0 = datetime(2025, 6, 1, 9, 0, tzinfo=UTC)


def _submit(session: Session, owner: Owner, *, at: datetime = T0, name: str = "sweep") -> Sweep:
    return create_sweep(session, owner.id, make_draft(name), now=at).sweep


def _walk(session: Session, sweep: Sweep, *statuses: SweepStatus) -> Sweep:
    for step, status in enumerate(statuses, start=1):
        sweep = transition_sweep(session, sweep.id, status, now=T0 + timedelta(minutes=step))
    return sweep


@pytest.mark.parametrize(
    "path",
    [
        (S.SUBMITTED, S.RUNNING, S.SUCCEEDED),
        (S.SUBMITTED, S.RUNNING, S.RUNNING, S.FAILED),
        (S.SUBMITTED, S.SUCCEEDED),  # finished between two polls
        (S.SUBMITTED, S.RUNNING, S.CANCELLING, S.CANCELLED),
        (S.SUBMITTED, S.CANCELLING, S.SUCCEEDED),  # finished before the stop took
        (S.CANCELLED,),  # cancelled before it reached Ray
        (S.FAILED,),  # Ray refused the job
    ],
    ids=lambda path: "-".join(path),
)
def test_allowed_paths(session: Session, alice: Owner, path: tuple[SweepStatus, ...]) -> None:
    sweep = _walk(session, _submit(session, alice), *path)
    assert sweep.status is path[-1]
    assert sweep.updated_at == T0 + timedelta(minutes=len(path))
    assert sweep.finished_at == T0 + timedelta(minutes=len(path))


def test_running_sets_started_at_once_and_keeps_the_job_text(
    session: Session, session_factory: sessionmaker[Session], alice: Owner
) -> None:
    sweep = _walk(session, _submit(session, alice), S.SUBMITTED, S.RUNNING)
    assert sweep.started_at == T0 + timedelta(minutes=2)
    assert sweep.finished_at is None
    transition_sweep(
        session,
        sweep.id,
        S.RUNNING,
        job_status="RUNNING",
        message="3/8 trials",
        mlflow_parent_run_id="0123abcd",
    )
    transition_sweep(session, sweep.id, S.CANCELLING, now=T0 + timedelta(hours=1))
    with session_factory() as fresh:
        stored = fresh.get(Sweep, sweep.id)
        assert stored is not None
        assert stored.started_at == T0 + timedelta(minutes=2)
        assert (stored.status, stored.job_status, stored.message) == (
            S.CANCELLING,
            "RUNNING",
            "3/8 trials",
        )
        assert stored.mlflow_parent_run_id == "0123abcd"


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ((), S.RUNNING),  # pending has no Ray Job to run
        ((), S.CANCELLING),  # nothing to stop yet
        ((S.SUBMITTED, S.RUNNING), S.SUBMITTED),
        ((S.SUBMITTED, S.RUNNING), S.PENDING),
        ((S.SUBMITTED, S.CANCELLING), S.RUNNING),
    ],
)
def test_refused_changes_leave_the_sweep_as_it_was(
    session: Session, alice: Owner, path: tuple[SweepStatus, ...], refused: SweepStatus
) -> None:
    sweep = _walk(session, _submit(session, alice), *path)
    before = (sweep.status, sweep.updated_at)
    with pytest.raises(InvalidTransitionError) as caught:
        transition_sweep(session, sweep.id, refused, message="ignored")
    assert caught.value.code == "invalid_transition"
    session.expire_all()
    stored = session.get(Sweep, sweep.id)
    assert stored is not None
    assert (stored.status, stored.updated_at, stored.message) == (*before, None)


@pytest.mark.parametrize("finished", sorted(FINISHED_STATUSES))
def test_finished_sweeps_are_final(session: Session, alice: Owner, finished: SweepStatus) -> None:
    sweep = _walk(session, _submit(session, alice), S.SUBMITTED, finished)
    for status in SweepStatus:
        assert not finished.can_become(status)
        with pytest.raises(InvalidTransitionError):
            transition_sweep(session, sweep.id, status)
    with pytest.raises(InvalidTransitionError):
        record_resubmission(session, sweep.id, max_resubmissions=5)


def test_status_predicates() -> None:
    assert {status for status in SweepStatus if status.is_finished()} == FINISHED_STATUSES
    assert {status for status in SweepStatus if status.is_active()} == ACTIVE_STATUSES
    assert all(status.can_become(status) for status in ACTIVE_STATUSES)


def test_a_dead_driver_is_resubmitted_up_to_the_limit(session: Session, alice: Owner) -> None:
    sweep = _walk(session, _submit(session, alice), S.SUBMITTED, S.RUNNING)
    again = record_resubmission(session, sweep.id, max_resubmissions=2, message="driver died")
    assert (again.status, again.resubmissions, again.job_status) == (S.PENDING, 1, None)
    assert again.message == "driver died"
    _walk(session, again, S.SUBMITTED)
    assert record_resubmission(session, sweep.id, max_resubmissions=2).resubmissions == 2
    _walk(session, again, S.SUBMITTED, S.RUNNING)
    with pytest.raises(ResubmissionLimitError) as caught:
        record_resubmission(session, sweep.id, max_resubmissions=2)
    assert caught.value.code == "resubmission_limit"
    assert isinstance(caught.value, InvalidTransitionError)
    assert transition_sweep(session, sweep.id, S.FAILED).resubmissions == 2


def test_a_pending_sweep_is_not_resubmitted(session: Session, alice: Owner) -> None:
    sweep = _submit(session, alice)
    with pytest.raises(InvalidTransitionError, match="pending"):
        record_resubmission(session, sweep.id, max_resubmissions=3)


def test_the_reconciler_sees_every_owners_unfinished_sweeps_oldest_first(
    session: Session, alice: Owner, bob: Owner
) -> None:
    pending = _submit(session, alice, at=T0 + timedelta(seconds=3))
    running = _walk(session, _submit(session, bob, at=T0 + timedelta(seconds=1)), S.SUBMITTED)
    cancelling = _walk(
        session, _submit(session, alice, at=T0 + timedelta(seconds=2)), S.SUBMITTED, S.CANCELLING
    )
    _walk(session, _submit(session, bob), S.SUBMITTED, S.SUCCEEDED)
    active = list_active_sweeps(session)
    assert [sweep.id for sweep in active] == [running.id, cancelling.id, pending.id]


def test_a_finished_sweep_shows_final_trials_once_they_are_read_after_its_end(
    session: Session, alice: Owner
) -> None:
    # The same rule in Python (the pages) and in SQL (the reconciler's list).
    never = _walk(session, _submit(session, alice, name="never"), S.SUBMITTED, S.SUCCEEDED)
    before = _walk(session, _submit(session, alice, name="before"), S.SUBMITTED)
    record_progress(session, before.id, TrialProgress(done=1), now=T0 + timedelta(minutes=1))
    before = _walk(session, before, S.RUNNING, S.CANCELLED)  # read before it ended
    after = _walk(session, _submit(session, alice, name="after"), S.SUBMITTED, S.FAILED)
    after = record_progress(session, after.id, TrialProgress(), now=T0 + timedelta(hours=1))
    running = _walk(session, _submit(session, alice, name="running"), S.SUBMITTED)
    running = record_progress(session, running.id, TrialProgress(), now=T0 + timedelta(hours=1))
    shown = {sweep.name: sweep.shows_final_trials for sweep in (never, before, after, running)}
    assert shown == {"never": False, "before": False, "after": True, "running": False}
    assert {sweep.name for sweep in list_unsynced_finished_sweeps(session)} == {"never", "before"}


def test_pages_are_newest_first_and_cover_every_sweep_once(
    session: Session, alice: Owner, bob: Owner
) -> None:
    # Two sweeps share a creation time: the id orders them, and no page skips one.
    times = [T0 + timedelta(seconds=n) for n in (0, 1, 2, 2, 3, 4, 5)]
    created = [_submit(session, alice, at=at, name=f"s{n}") for n, at in enumerate(times)]
    _submit(session, bob, at=T0 + timedelta(days=1))
    expected = [s.id for s in sorted(created, key=lambda s: (s.created_at, s.id), reverse=True)]
    seen: list[str] = []
    token: str | None = None
    sizes = []
    while True:
        page = list_sweeps(session, alice.id, limit=3, page_token=token)
        assert page.total == 7
        seen += [sweep.id for sweep in page.items]
        sizes.append(len(page.items))
        token = page.next_page_token
        if token is None:
            break
    assert seen == expected
    assert sizes == [3, 3, 1]


def test_a_new_sweep_does_not_shift_the_next_page(session: Session, alice: Owner) -> None:
    for n in range(4):
        _submit(session, alice, at=T0 + timedelta(seconds=n))
    first = list_sweeps(session, alice.id, limit=2)
    _submit(session, alice, at=T0 + timedelta(hours=1))
    second = list_sweeps(session, alice.id, limit=2, page_token=first.next_page_token)
    assert [s.created_at for s in second.items] == [T0 + timedelta(seconds=n) for n in (1, 0)]
    assert second.total == 5


def test_the_page_size_is_capped(
    session: Session, alice: Owner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages_module, "MAX_PAGE_SIZE", 3)
    for n in range(5):
        _submit(session, alice, at=T0 + timedelta(seconds=n))
    page = list_sweeps(session, alice.id, limit=1000)
    assert (len(page.items), page.total) == (3, 5)
    assert page.next_page_token is not None


def test_an_empty_listing(session: Session, alice: Owner) -> None:
    page = list_sweeps(session, alice.id)
    assert (page.items, page.total, page.next_page_token) == ([], 0, None)


@pytest.mark.parametrize(
    "token",
    ["", "not base64 !", "bm9wZQ", "WzEsMl0", "WyIyMDI1LTAxLTAxVDAwOjAwOjAwIiwgInN3LTEiXQ"],
    ids=["empty", "garbage", "not-json", "wrong-shape", "naive-time"],
)
def test_bad_page_tokens_and_limits_are_invalid_arguments(
    session: Session, alice: Owner, token: str
) -> None:
    with pytest.raises(InvalidArgumentError, match="page_token") as caught:
        list_sweeps(session, alice.id, page_token=token)
    assert caught.value.code == "invalid_argument"
    with pytest.raises(InvalidArgumentError, match="limit"):
        list_sweeps(session, alice.id, limit=0)
