"""The store's tables: owners, their API keys and their sweeps.

Every timestamp is a timezone-aware UTC ``datetime`` (``UtcDateTime``), on SQLite as
on PostgreSQL. The schema itself is created by the migrations in ``migrations/``,
never by ``create_all``; a test checks that the two agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    DateTime,
    Dialect,
    Enum,
    ForeignKey,
    Index,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
)
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Named constraints, so that later migrations can alter or drop them by name on
# every backend (SQLite's batch mode needs the names).
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

DEFAULT_MAX_CONCURRENT_SWEEPS = 4
DEFAULT_MAX_TRIALS_PER_SWEEP = 1000  # the same cap as DicesweepSettings.max_trials
DEFAULT_MAX_GPUS_PER_TRIAL = 1.0  # fractions share one GPU; a whole GPU is the default ceiling
OWNER_NAME_LENGTH = 100
IDEMPOTENCY_KEY_LENGTH = 255  # characters of an ``Idempotency-Key`` header kept


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC ``datetime``: PostgreSQL keeps ``timestamptz``; SQLite keeps
    the UTC wall time, and the zone is put back on reading.

    Raises:
        ValueError: when binding a naive ``datetime`` (its zone would be a guess).
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store keeps timezone-aware times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class SweepStatus(StrEnum):
    """Where a sweep is in its life; ``can_become`` holds the allowed changes."""

    PENDING = "pending"  # stored; no Ray Job yet
    SUBMITTED = "submitted"  # its Ray Job exists; the driver has not reported running
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLING = "cancelling"  # a stop was requested; the job has not stopped yet
    CANCELLED = "cancelled"

    def is_finished(self) -> bool:
        """Whether the sweep has ended; a finished sweep never changes again."""
        return self in FINISHED_STATUSES

    def is_active(self) -> bool:
        """Whether the sweep still needs the reconciler's attention (not finished)."""
        return not self.is_finished()

    def can_become(self, target: SweepStatus) -> bool:
        """Whether a change from this status to ``target`` is allowed; staying in an
        active status is (the reconciler refreshes the job's text)."""
        return target in _NEXT_STATUSES[self] or (target is self and self.is_active())


FINISHED_STATUSES = frozenset({SweepStatus.SUCCEEDED, SweepStatus.FAILED, SweepStatus.CANCELLED})
ACTIVE_STATUSES = frozenset(set(SweepStatus) - FINISHED_STATUSES)

# A Ray Job may finish between two polls of the reconciler, so a submitted job can be
# seen finished without ever being seen running, and a job asked to stop can still
# succeed or fail first. Going back to PENDING after the driver died is a
# resubmission (``lifecycle.record_resubmission``), not an ordinary change.
_NEXT_STATUSES: dict[SweepStatus, frozenset[SweepStatus]] = {
    SweepStatus.PENDING: frozenset(
        {SweepStatus.SUBMITTED, SweepStatus.FAILED, SweepStatus.CANCELLED}
    ),
    SweepStatus.SUBMITTED: frozenset(
        {
            SweepStatus.RUNNING,
            SweepStatus.SUCCEEDED,
            SweepStatus.FAILED,
            SweepStatus.CANCELLING,
            SweepStatus.CANCELLED,
        }
    ),
    SweepStatus.RUNNING: frozenset(
        {SweepStatus.SUCCEEDED, SweepStatus.FAILED, SweepStatus.CANCELLING, SweepStatus.CANCELLED}
    ),
    SweepStatus.CANCELLING: frozenset(
        {SweepStatus.CANCELLED, SweepStatus.SUCCEEDED, SweepStatus.FAILED}
    ),
    SweepStatus.SUCCEEDED: frozenset(),
    SweepStatus.FAILED: frozenset(),
    SweepStatus.CANCELLED: frozenset(),
}


class Base(DeclarativeBase):
    """The declarative base of the store's tables."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Owner(Base):
    """Whoever submits sweeps, with quotas; API keys authenticate as an owner."""

    __tablename__ = "owners"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(OWNER_NAME_LENGTH), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    max_concurrent_sweeps: Mapped[int] = mapped_column(
        default=DEFAULT_MAX_CONCURRENT_SWEEPS, server_default=str(DEFAULT_MAX_CONCURRENT_SWEEPS)
    )
    max_trials_per_sweep: Mapped[int] = mapped_column(
        default=DEFAULT_MAX_TRIALS_PER_SWEEP, server_default=str(DEFAULT_MAX_TRIALS_PER_SWEEP)
    )
    max_gpus_per_trial: Mapped[float] = mapped_column(
        default=DEFAULT_MAX_GPUS_PER_TRIAL, server_default=str(DEFAULT_MAX_GPUS_PER_TRIAL)
    )


class ApiKey(Base):
    """One API key of an owner. Only the SHA-256 of the key is kept (see ``keys``)."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("owners.id"), index=True)
    prefix: Mapped[str] = mapped_column(String(16), unique=True)  # shown, and the lookup key
    secret_hash: Mapped[str] = mapped_column(String(64))  # hex SHA-256 of the whole key
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime())

    owner: Mapped[Owner] = relationship()


class Sweep(Base):
    """One submitted sweep; its id is also its Ray Job's ``submission_id``."""

    __tablename__ = "sweeps"
    __table_args__ = (
        # A retried submission finds its sweep; another owner may use the same key.
        UniqueConstraint("owner_id", "idempotency_key"),
        # An owner's sweeps, newest first (the id breaks ties in the page order).
        Index("ix_sweeps_owner_id_created_at_id", "owner_id", "created_at", "id"),
        # The reconciler's scan of the active statuses.
        Index("ix_sweeps_status", "status"),
        # The concurrency quota's count of an owner's active sweeps, from the index alone.
        Index("ix_sweeps_owner_id_status", "owner_id", "status"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("owners.id"))
    name: Mapped[str] = mapped_column(String(100))
    preset: Mapped[str | None] = mapped_column(String(100))  # the spec's ``extends``
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)  # as submitted
    spec_sha256: Mapped[str] = mapped_column(String(64))  # of ``spec``, for idempotent retries
    resolved_spec: Mapped[dict[str, Any]] = mapped_column(JSON)  # presets applied, validated
    trial_count: Mapped[int]
    gpus_per_trial: Mapped[float]
    status: Mapped[SweepStatus] = mapped_column(
        Enum(
            SweepStatus,
            name="sweep_status",
            native_enum=False,  # a VARCHAR with a CHECK: no type to migrate on PostgreSQL
            create_constraint=True,
            length=16,
            values_callable=lambda statuses: [status.value for status in statuses],
            validate_strings=True,
        )
    )
    job_status: Mapped[str | None] = mapped_column(String(32))  # Ray's JobStatus, verbatim
    message: Mapped[str | None] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(String(IDEMPOTENCY_KEY_LENGTH))
    resubmissions: Mapped[int] = mapped_column(default=0, server_default="0")
    mlflow_parent_run_id: Mapped[str | None] = mapped_column(String(64))
    # The trials' progress as MLflow last showed it (``lifecycle.record_progress``):
    # what GET /v1/sweeps/{id} answers without searching MLflow on every poll.
    mlflow_experiment_id: Mapped[str | None] = mapped_column(String(64))
    trials_running: Mapped[int] = mapped_column(default=0, server_default="0")
    trials_done: Mapped[int] = mapped_column(default=0, server_default="0")
    trials_failed: Mapped[int] = mapped_column(default=0, server_default="0")
    trials_stopped: Mapped[int] = mapped_column(default=0, server_default="0")  # KILLED
    best_trial: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # A two-stage sweep's stage and chosen settings (``progress.tuning_state``); null without.
    tuning: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    trials_synced_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # A finished sweep's trial rows as MLflow last showed them (``record_progress``):
    # its table and trials stay readable while MLflow is away.
    trial_rows: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())

    @hybrid_property
    def shows_final_trials(self) -> bool:
        """Finished, and its trials read from MLflow since it finished (after its open
        runs were closed): what its page shows will not change again. In a query, the
        same condition in SQL."""
        return (
            self.status.is_finished()
            and self.finished_at is not None
            and self.trials_synced_at is not None
            and self.trials_synced_at >= self.finished_at
        )

    @shows_final_trials.inplace.expression
    @classmethod
    def _shows_final_trials_expression(cls) -> ColumnElement[bool]:
        return and_(
            cls.status.in_(FINISHED_STATUSES),
            cls.finished_at.is_not(None),
            cls.trials_synced_at.is_not(None),
            cls.trials_synced_at >= cls.finished_at,
        )
