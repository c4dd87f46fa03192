"""Owners: whoever submits sweeps, with the quotas each submission is checked against."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from sweep_service.store.database import committing
from sweep_service.store.errors import InvalidArgumentError, NotFoundError
from sweep_service.store.models import (
    DEFAULT_MAX_CONCURRENT_SWEEPS,
    DEFAULT_MAX_GPUS_PER_TRIAL,
    DEFAULT_MAX_TRIALS_PER_SWEEP,
    OWNER_NAME_LENGTH,
    Owner,
    utc_now,
)


def check_owner_name(name: str) -> None:
    """Raises:
    InvalidArgumentError: ``name`` is empty or longer than ``OWNER_NAME_LENGTH``."""
    if not 1 <= len(name) <= OWNER_NAME_LENGTH:
        raise InvalidArgumentError(f"an owner's name has 1 to {OWNER_NAME_LENGTH} characters")


def create_owner(
    session: Session,
    name: str,
    *,
    max_concurrent_sweeps: int = DEFAULT_MAX_CONCURRENT_SWEEPS,
    max_trials_per_sweep: int = DEFAULT_MAX_TRIALS_PER_SWEEP,
    max_gpus_per_trial: float = DEFAULT_MAX_GPUS_PER_TRIAL,
    now: datetime | None = None,
) -> Owner:
    """A new owner, committed. A quota of 0 lets the owner submit nothing.

    Raises:
        InvalidArgumentError: an empty or too long name, or a negative quota.
        ConflictError: an owner of that name exists already.
    """
    check_owner_name(name)
    quotas = {
        "max_concurrent_sweeps": max_concurrent_sweeps,
        "max_trials_per_sweep": max_trials_per_sweep,
        "max_gpus_per_trial": max_gpus_per_trial,
    }
    _check_quotas(quotas)
    owner = Owner(name=name, created_at=now or utc_now(), **quotas)
    with committing(session, conflict=f"an owner named {name!r} exists already"):
        session.add(owner)
    return owner


def set_quotas(session: Session, owner_id: int, **quotas: float) -> Owner:
    """Change some of the owner's quotas (``max_concurrent_sweeps``,
    ``max_trials_per_sweep``, ``max_gpus_per_trial``), committed; running sweeps keep
    running, and the next submission is checked against the new values.

    Raises:
        InvalidArgumentError: an unknown quota, or a negative one.
        NotFoundError: no owner has that id.
    """
    unknown = sorted(set(quotas) - set(QUOTAS))
    if unknown:
        raise InvalidArgumentError(f"unknown quotas {unknown}; valid: {', '.join(QUOTAS)}")
    _check_quotas(quotas)
    with committing(session):
        owner = lock_owner(session, owner_id)
        for quota, value in quotas.items():
            setattr(owner, quota, value)
    return owner


QUOTAS = ("max_concurrent_sweeps", "max_trials_per_sweep", "max_gpus_per_trial")


def _check_quotas(quotas: dict[str, float]) -> None:
    negative = [f"{quota}={value}" for quota, value in quotas.items() if value < 0]
    if negative:
        raise InvalidArgumentError(f"quotas cannot be negative: {', '.join(negative)}")


def get_owner_by_name(session: Session, name: str) -> Owner:
    """The owner called ``name``.

    Raises:
        NotFoundError: no owner has that name.
    """
    owner = session.scalars(select(Owner).where(Owner.name == name)).one_or_none()
    if owner is None:
        raise NotFoundError(f"no owner named {name!r}")
    return owner


def lock_owner(session: Session, owner_id: int) -> Owner:
    """The owner ``owner_id``, re-read and locked until the session's transaction ends,
    so that checks against its quotas and its other sweeps hold until the commit
    (PostgreSQL: ``FOR UPDATE``; SQLite: a ``committing`` block holds the write lock).

    Raises:
        NotFoundError: no owner has that id.
    """
    owner = session.scalars(_LOCKED_OWNER, {"owner_id": owner_id}).one_or_none()
    if owner is None:
        raise NotFoundError(f"no owner with id {owner_id}")
    return owner


_LOCKED_OWNER = (  # built once: every submission runs it
    select(Owner)
    .where(Owner.id == bindparam("owner_id"))
    .with_for_update()
    .execution_options(populate_existing=True)
)
