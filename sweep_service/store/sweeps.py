"""Sweeps: idempotent submission within quotas, an owner's view, the active ones.

``create_sweep`` commits before it returns, or rolls everything back and raises, so a
failed submission leaves nothing half-written. An owner sees only its own sweeps;
another owner's sweep reads as absent, never as forbidden. Status changes are in
``lifecycle``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol, cast

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from search_spaces.spec import SweepSpec, trial_count
from sweep_service.store.database import committing
from sweep_service.store.errors import (
    IdempotencyMismatchError,
    InvalidArgumentError,
    NotFoundError,
    QuotaExceededError,
    StoreError,
)
from sweep_service.store.models import (
    ACTIVE_STATUSES,
    IDEMPOTENCY_KEY_LENGTH,
    Owner,
    Sweep,
    SweepStatus,
    utc_now,
)
from sweep_service.store.owners import lock_owner
from sweep_service.store.reads import StatementReader

SWEEP_ID_PREFIX = "sw-"
SWEEP_ID_BYTES = 8  # 16 hex characters after the prefix


@dataclass(frozen=True)
class SweepDraft:
    """What a submission stores, taken from a spec already validated by ``resolve_spec``."""

    name: str
    preset: str | None
    spec: dict[str, Any]  # as submitted: what an idempotent retry is compared by
    resolved_spec: dict[str, Any]
    trial_count: int
    gpus_per_trial: float

    @classmethod
    def from_spec(cls, submitted: Mapping[str, Any], resolved: SweepSpec) -> SweepDraft:
        """The draft of ``submitted``, whose resolved and validated form is ``resolved``."""
        return cls(
            name=resolved.name,
            preset=resolved.extends,
            spec=dict(submitted),
            resolved_spec=resolved.model_dump(mode="json"),
            trial_count=trial_count(resolved),
            gpus_per_trial=resolved.resources.gpus_per_trial,
        )


class Submission(NamedTuple):
    """The sweep a submission stands for, and whether this call created it (``False``:
    a retry with the same ``Idempotency-Key`` found the sweep of the first try)."""

    sweep: Sweep
    created: bool


def spec_digest(spec: Mapping[str, Any]) -> str:
    """The hex SHA-256 of ``spec`` as canonical JSON (sorted keys, no spaces), so that
    key order and formatting do not make two equal specs differ."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def new_sweep_id() -> str:
    """A fresh sweep id, ``sw-`` and 16 hex characters (also the Ray Job's submission id)."""
    return SWEEP_ID_PREFIX + secrets.token_hex(SWEEP_ID_BYTES)


@dataclass(frozen=True)
class SweepRequest:
    """One submission for ``create_sweeps``: ``owner_id`` asks to store ``draft``."""

    owner_id: int
    draft: SweepDraft
    idempotency_key: str | None = None


def create_sweep(
    session: Session,
    owner_id: int,
    draft: SweepDraft,
    *,
    idempotency_key: str | None = None,
    now: datetime | None = None,
) -> Submission:
    """Store a new ``pending`` sweep, committed; or, when this owner already used
    ``idempotency_key`` with the same spec, return that sweep and store nothing.

    The owner's row is locked first, so concurrent submissions of one owner are
    checked (idempotency key, quotas) and written one at a time.

    Raises:
        InvalidArgumentError: an empty ``idempotency_key``, or one over
            ``IDEMPOTENCY_KEY_LENGTH`` characters.
        NotFoundError: no owner has that id.
        IdempotencyMismatchError: the owner used ``idempotency_key`` with another spec.
        QuotaExceededError: too many trials or GPUs per trial, or too many active sweeps.
        ConflictError: the generated id is taken (nothing written; submitting again works).
    """
    request = SweepRequest(owner_id, draft, idempotency_key)
    (outcome,) = create_sweeps(session, [request], now=now)
    if isinstance(outcome, StoreError):
        raise outcome
    return outcome


def create_sweeps(
    session: Session, requests: Sequence[SweepRequest], *, now: datetime | None = None
) -> list[Submission | StoreError]:
    """Store several submissions in one committed transaction. Each is checked as
    ``create_sweep`` checks it, in order, against the store and the requests before
    it (an idempotent retry in the same batch finds the first; the quotas count the
    sweeps the batch adds). Returns one outcome per request: its ``Submission``, or
    the ``StoreError`` that refused it, for which nothing was stored.

    Every owner involved is locked first, in id order, so concurrent batches (of
    other processes too) neither interleave nor deadlock.

    Raises:
        ConflictError: a unique rule refused the batch's write (a generated id taken,
            or an ``Idempotency-Key`` another process stored meanwhile); nothing of
            the batch was stored, and each request may be submitted again alone.
    """
    now = now or utc_now()
    outcomes: list[Submission | StoreError | None] = [None] * len(requests)
    with committing(session, conflict="a sweep with the generated id exists; submit again"):
        # The batch's sweeps join the session together at the end (one multi-row
        # insert); until then the batch keeps its own account of them.
        batch = _Batch(session, sorted({request.owner_id for request in requests}))
        for index, request in enumerate(requests):
            try:
                outcomes[index] = batch.submit(request, now)
            except StoreError as refusal:
                outcomes[index] = refusal
        session.add_all(batch.new_sweeps)
    return [outcome for outcome in outcomes if outcome is not None]


class _Batch:
    """The owners of a batch (locked) and what the batch has stored so far."""

    def __init__(self, session: Session, owner_ids: list[int]) -> None:
        self.session = session
        self.owners: dict[int, Owner | NotFoundError] = {}
        self.active: dict[int, int] = {}
        for owner_id in owner_ids:
            try:
                self.owners[owner_id] = lock_owner(session, owner_id)
            except NotFoundError as missing:
                self.owners[owner_id] = missing
        self.by_key: dict[tuple[int, str], Sweep] = {}
        self.new_sweeps: list[Sweep] = []

    def submit(self, request: SweepRequest, now: datetime) -> Submission:
        key = request.idempotency_key
        if key is not None and not 1 <= len(key) <= IDEMPOTENCY_KEY_LENGTH:
            raise InvalidArgumentError(
                f"an Idempotency-Key has 1 to {IDEMPOTENCY_KEY_LENGTH} characters"
            )
        owner = self.owners[request.owner_id]
        if isinstance(owner, NotFoundError):
            raise owner
        digest = spec_digest(request.draft.spec)
        if key is not None:
            earlier = self.by_key.get((owner.id, key)) or _earlier_submission(
                self.session, owner.id, key
            )
            if earlier is not None:
                if earlier.spec_sha256 != digest:
                    raise IdempotencyMismatchError(
                        f"Idempotency-Key {key!r} was used for sweep {earlier.id} "
                        "with a different spec"
                    )
                return Submission(earlier, created=False)
        if owner.id not in self.active:
            self.active[owner.id] = count_active_sweeps(self.session, owner.id)
        _check_quotas(owner, request.draft, self.active[owner.id])
        sweep = _new_sweep(owner.id, request.draft, digest, key, now)
        self.active[owner.id] += 1
        self.new_sweeps.append(sweep)
        if key is not None:
            self.by_key[(owner.id, key)] = sweep
        return Submission(sweep, created=True)


def _earlier_submission(session: Session, owner_id: int, key: str) -> Sweep | None:
    """The owner's sweep submitted with ``key``, if any."""
    query = select(Sweep).where(Sweep.owner_id == owner_id, Sweep.idempotency_key == key)
    return session.scalars(query).one_or_none()


def _new_sweep(
    owner_id: int, draft: SweepDraft, digest: str, idempotency_key: str | None, now: datetime
) -> Sweep:
    return Sweep(
        id=new_sweep_id(),
        owner_id=owner_id,
        name=draft.name,
        preset=draft.preset,
        spec=draft.spec,
        spec_sha256=digest,
        resolved_spec=draft.resolved_spec,
        trial_count=draft.trial_count,
        gpus_per_trial=draft.gpus_per_trial,
        status=SweepStatus.PENDING,
        idempotency_key=idempotency_key,
        resubmissions=0,
        created_at=now,
        updated_at=now,
    )


def _check_quotas(owner: Owner, draft: SweepDraft, active: int) -> None:
    """Raises QuotaExceededError naming the first quota ``draft`` would break, when
    ``owner`` has ``active`` unfinished sweeps."""
    if draft.trial_count > owner.max_trials_per_sweep:
        raise QuotaExceededError(
            f"{draft.trial_count} trials exceed the quota of "
            f"{owner.max_trials_per_sweep} trials per sweep"
        )
    if draft.gpus_per_trial > owner.max_gpus_per_trial:
        raise QuotaExceededError(
            f"{draft.gpus_per_trial:g} GPUs per trial exceed the quota of "
            f"{owner.max_gpus_per_trial:g}"
        )
    if active >= owner.max_concurrent_sweeps:
        raise QuotaExceededError(
            f"{active} sweeps are active; the quota is {owner.max_concurrent_sweeps} at once"
        )


def get_sweep(session: Session, owner_id: int, sweep_id: str) -> Sweep:
    """Sweep ``sweep_id`` of owner ``owner_id``.

    Raises:
        NotFoundError: no such sweep, or it belongs to another owner (the same answer).
    """
    params = {"sweep_id": sweep_id, "owner_id": owner_id}
    sweep = session.scalars(_OWNED_SWEEP, params).one_or_none()
    if sweep is None:
        raise NotFoundError(f"no sweep {sweep_id!r}")
    return sweep


# Built once: the hottest read of the API (every poll of a sweep) then skips building
# and keying the statement.
_OWNED_SWEEP = select(Sweep).where(
    Sweep.id == bindparam("sweep_id"), Sweep.owner_id == bindparam("owner_id")
)


class SweepFields(Protocol):
    """A sweep as the API shows it: a ``Sweep``, or what ``read_sweep_fields`` reads
    (read only: a row of the store)."""

    id: str
    name: str
    status: SweepStatus
    preset: str | None
    trial_count: int
    gpus_per_trial: float
    message: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    mlflow_experiment_id: str | None
    mlflow_parent_run_id: str | None
    trials_running: int
    trials_done: int
    trials_failed: int
    best_trial: dict[str, Any] | None
    trials_synced_at: datetime | None


def read_sweep_fields(reader: StatementReader, owner_id: int, sweep_id: str) -> SweepFields:
    """Sweep ``sweep_id`` of owner ``owner_id`` as the API shows it (every column but
    the specs), in one statement through ``reader``: no session, no objects, and on
    SQLite not even a transaction. For routes that only read a sweep.

    Raises:
        NotFoundError: no such sweep, or it belongs to another owner (the same answer).
    """
    row = reader.one(_OWNED_SWEEP_FIELDS, {"sweep_id": sweep_id, "owner_id": owner_id})
    if row is None:
        raise NotFoundError(f"no sweep {sweep_id!r}")
    return cast(SweepFields, row)


_OWNED_SWEEP_FIELDS = select(
    *(column for column in Sweep.__table__.c if column.name not in ("spec", "resolved_spec"))
).where(Sweep.id == bindparam("sweep_id"), Sweep.owner_id == bindparam("owner_id"))


def count_active_sweeps(session: Session, owner_id: int) -> int:
    """How many of the owner's sweeps are not finished (what the concurrency quota counts)."""
    return session.scalar(_ACTIVE_COUNT, {"owner_id": owner_id}) or 0


_ACTIVE_COUNT = (  # built once: every submission runs it
    select(func.count())
    .select_from(Sweep)
    .where(Sweep.owner_id == bindparam("owner_id"), Sweep.status.in_(ACTIVE_STATUSES))
)


def list_active_sweeps(session: Session) -> list[Sweep]:
    """Every owner's unfinished sweeps, oldest first: the reconciler's work, and what
    a restarted service picks up again."""
    query = (
        select(Sweep).where(Sweep.status.in_(ACTIVE_STATUSES)).order_by(Sweep.created_at, Sweep.id)
    )
    return list(session.scalars(query))
