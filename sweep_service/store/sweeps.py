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
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from search_spaces.resolve import Resolved
from sweep_service.store.database import committing
from sweep_service.store.errors import (
    IdempotencyMismatchError,
    InvalidArgumentError,
    NotFoundError,
    QuotaExceededError,
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
    def from_spec(cls, submitted: Mapping[str, Any], resolved: Resolved) -> SweepDraft:
        """The draft of ``submitted``, whose resolved and validated form (and trial count)
        is ``resolved`` (``search_spaces.resolve.resolve_submission``)."""
        spec = resolved.spec
        return cls(
            name=spec.name,
            preset=spec.extends,
            spec=dict(submitted),
            resolved_spec=spec.model_dump(mode="json"),
            trial_count=resolved.trials,
            gpus_per_trial=spec.resources.gpus_per_trial,
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
        InvalidArgumentError: an empty ``idempotency_key``, one over
            ``IDEMPOTENCY_KEY_LENGTH`` characters or one holding a NUL.
        NotFoundError: no owner has that id.
        IdempotencyMismatchError: the owner used ``idempotency_key`` with another spec.
        QuotaExceededError: too many trials or GPUs per trial, or too many active sweeps.
        ConflictError: the generated id is taken, or a concurrent retry stored the same
            ``idempotency_key`` first (nothing written; submitting again answers).
    """
    key = idempotency_key
    if key is not None and (not 1 <= len(key) <= IDEMPOTENCY_KEY_LENGTH or "\x00" in key):
        raise InvalidArgumentError(
            f"an Idempotency-Key has 1 to {IDEMPOTENCY_KEY_LENGTH} characters, none NUL"
        )
    digest = spec_digest(draft.spec)
    with committing(session, conflict="a sweep with the generated id exists; submit again"):
        owner = lock_owner(session, owner_id)
        earlier = None if key is None else _earlier_submission(session, owner.id, key)
        if earlier is not None:
            if earlier.spec_sha256 != digest:
                raise IdempotencyMismatchError(
                    f"Idempotency-Key {key!r} was used for sweep {earlier.id} with a different spec"
                )
            return Submission(earlier, created=False)
        _check_quotas(owner, draft, count_active_sweeps(session, owner.id))
        sweep = _new_sweep(owner.id, draft, digest, key, now or utc_now())
        session.add(sweep)
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
    if "\x00" in sweep_id:  # no stored id has one, and PostgreSQL refuses it in a query
        raise NotFoundError(f"no sweep {sweep_id!r}")
    query = select(Sweep).where(Sweep.id == sweep_id, Sweep.owner_id == owner_id)
    sweep = session.scalars(query).one_or_none()
    if sweep is None:
        raise NotFoundError(f"no sweep {sweep_id!r}")
    return sweep


def count_active_sweeps(session: Session, owner_id: int) -> int:
    """How many of the owner's sweeps are not finished (what the concurrency quota counts)."""
    query = select(func.count()).where(
        Sweep.owner_id == owner_id, Sweep.status.in_(ACTIVE_STATUSES)
    )
    return session.scalar(query) or 0


def list_active_sweeps(session: Session) -> list[Sweep]:
    """Every owner's unfinished sweeps, oldest first: the reconciler's work, and what
    a restarted service picks up again."""
    query = (
        select(Sweep).where(Sweep.status.in_(ACTIVE_STATUSES)).order_by(Sweep.created_at, Sweep.id)
    )
    return list(session.scalars(query))
