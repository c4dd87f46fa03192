"""A sweep's status changes (the reconciler's and the cancel route's), resubmissions,
and the trials' progress the reconciler reads from MLflow.

Each change re-reads the sweep under a lock (PostgreSQL: ``FOR UPDATE``; SQLite: the
transaction's write lock) and checks it against the status found there, so two
writers never overwrite each other's change: the second is checked against the
first's result. Each commits, or rolls back and raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sweep_service.store.database import committing
from sweep_service.store.errors import (
    InvalidTransitionError,
    NotFoundError,
    ResubmissionLimitError,
)
from sweep_service.store.models import FINISHED_STATUSES, Sweep, SweepStatus, utc_now


@dataclass(frozen=True)
class TrialProgress:
    """A sweep's trials as its tracking store shows them: counts by state (``failed``
    FAILED, ``stopped`` KILLED by a cancel), the best trial so far (a JSON object, or
    None), and the MLflow ids once they exist."""

    running: int = 0
    done: int = 0
    failed: int = 0
    best_trial: dict[str, Any] | None = None
    mlflow_experiment_id: str | None = None
    mlflow_parent_run_id: str | None = None
    # Every trial's row (``sweep_service.results.trial_rows``, JSON-safe), kept once
    # the sweep has finished; None: not read.
    rows: list[dict[str, Any]] | None = None
    tuning: dict[str, Any] | None = None  # {"stage": ..., "chosen": {...}} with tune
    stopped: int = 0  # KILLED: stopped by a cancel, not failed


def transition_sweep(
    session: Session,
    sweep_id: str,
    status: SweepStatus,
    *,
    job_status: str | None = None,
    message: str | None = None,
    mlflow_parent_run_id: str | None = None,
    now: datetime | None = None,
) -> Sweep:
    """Move sweep ``sweep_id`` to ``status``, committed, after checking the change
    against the sweep's current status (re-read under a lock, so a concurrent change
    is seen, not overwritten). Entering ``running`` sets ``started_at`` once; entering
    a finished status sets ``finished_at``. ``job_status``, ``message`` and
    ``mlflow_parent_run_id`` replace the stored ones when given.

    Raises:
        NotFoundError: no such sweep.
        InvalidTransitionError: ``SweepStatus.can_become`` refuses the change.
    """
    now = now or utc_now()
    with committing(session):
        sweep = _lock_sweep(session, sweep_id)
        if not sweep.status.can_become(status):
            raise InvalidTransitionError(
                f"sweep {sweep_id} is {sweep.status}; it cannot become {status}"
            )
        sweep.status = status
        sweep.updated_at = now
        if status is SweepStatus.RUNNING and sweep.started_at is None:
            sweep.started_at = now
        if status.is_finished():
            sweep.finished_at = now
        if job_status is not None:
            sweep.job_status = job_status
        if message is not None:
            sweep.message = message
        if mlflow_parent_run_id is not None:
            sweep.mlflow_parent_run_id = mlflow_parent_run_id
    return sweep


def record_resubmission(
    session: Session,
    sweep_id: str,
    *,
    max_resubmissions: int,
    message: str | None = None,
    now: datetime | None = None,
) -> Sweep:
    """Send a sweep whose driver died back to ``pending``, committed, counting one more
    resubmission; the runner then submits it as it does a new sweep.

    Raises:
        NotFoundError: no such sweep.
        InvalidTransitionError: the sweep is not ``submitted`` or ``running``.
        ResubmissionLimitError: it was resubmitted ``max_resubmissions`` times already
            (the caller then marks it failed).
    """
    now = now or utc_now()
    with committing(session):
        sweep = _lock_sweep(session, sweep_id)
        if sweep.status not in (SweepStatus.SUBMITTED, SweepStatus.RUNNING):
            raise InvalidTransitionError(
                f"sweep {sweep_id} is {sweep.status}; only a submitted or running sweep "
                "is resubmitted"
            )
        if sweep.resubmissions >= max_resubmissions:
            raise ResubmissionLimitError(
                f"sweep {sweep_id} was resubmitted {sweep.resubmissions} times; "
                f"the limit is {max_resubmissions}"
            )
        sweep.resubmissions += 1
        sweep.status = SweepStatus.PENDING
        sweep.job_status = None
        sweep.updated_at = now
        if message is not None:
            sweep.message = message
    return sweep


def _lock_sweep(session: Session, sweep_id: str) -> Sweep:
    """Sweep ``sweep_id`` re-read and locked until the transaction ends.

    Raises:
        NotFoundError: no such sweep.
    """
    query = (
        select(Sweep)
        .where(Sweep.id == sweep_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    sweep = session.scalars(query).one_or_none()
    if sweep is None:
        raise NotFoundError(f"no sweep {sweep_id!r}")
    return sweep


def record_progress(
    session: Session, sweep_id: str, progress: TrialProgress, *, now: datetime | None = None
) -> Sweep:
    """Store ``progress`` as sweep ``sweep_id``'s, committed, with ``trials_synced_at``
    ``now`` (when the read began; the current time by default);
    the MLflow ids are kept when ``progress`` has none. A finished sweep also keeps
    ``progress.rows``, its trials as they ended. The status is not touched.

    Raises:
        NotFoundError: no such sweep.
    """
    with committing(session):
        sweep = _lock_sweep(session, sweep_id)
        sweep.trials_running = progress.running
        sweep.trials_done = progress.done
        sweep.trials_failed = progress.failed
        sweep.trials_stopped = progress.stopped
        sweep.best_trial = progress.best_trial
        sweep.tuning = progress.tuning
        sweep.mlflow_experiment_id = progress.mlflow_experiment_id or sweep.mlflow_experiment_id
        sweep.mlflow_parent_run_id = progress.mlflow_parent_run_id or sweep.mlflow_parent_run_id
        if sweep.status.is_finished() and progress.rows is not None:
            sweep.trial_rows = progress.rows
        sweep.trials_synced_at = now or utc_now()
    return sweep


def list_unsynced_finished_sweeps(session: Session) -> list[Sweep]:
    """Finished sweeps whose progress was last read before they finished (or never):
    the reconciler reads it once more, so that what a finished sweep shows is final."""
    query = select(Sweep).where(Sweep.status.in_(FINISHED_STATUSES), ~Sweep.shows_final_trials)
    return list(session.scalars(query.order_by(Sweep.finished_at, Sweep.id)))
