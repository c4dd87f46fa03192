"""Owners with quotas, their hashed API keys, and their sweeps.

Revision ID: 0001
Revises:
Create Date: 2025-11-22

Written against ``models.py`` with plain SQLAlchemy types (``UtcDateTime`` is
``DateTime(timezone=True)`` underneath), so that this file never changes when the
models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SWEEP_STATUSES = (
    "pending",
    "submitted",
    "running",
    "succeeded",
    "failed",
    "cancelling",
    "cancelled",
)


def _utc(name: str, *, nullable: bool) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "owners",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        _utc("created_at", nullable=False),
        sa.Column("max_concurrent_sweeps", sa.Integer(), server_default="4", nullable=False),
        sa.Column("max_trials_per_sweep", sa.Integer(), server_default="1000", nullable=False),
        sa.Column("max_gpus_per_trial", sa.Double(), server_default="1.0", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_owners")),
        sa.UniqueConstraint("name", name=op.f("uq_owners_name")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        _utc("created_at", nullable=False),
        _utc("revoked_at", nullable=True),
        _utc("last_used_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_api_keys_owner_id_owners")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    op.create_index(op.f("ix_api_keys_owner_id"), "api_keys", ["owner_id"])
    op.create_table(
        "sweeps",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("preset", sa.String(length=100), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("spec_sha256", sa.String(length=64), nullable=False),
        sa.Column("resolved_spec", sa.JSON(), nullable=False),
        sa.Column("trial_count", sa.Integer(), nullable=False),
        sa.Column("gpus_per_trial", sa.Double(), nullable=False),
        sa.Column(
            "status",
            sa.Enum(*SWEEP_STATUSES, name="sweep_status", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("job_status", sa.String(length=32), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("resubmissions", sa.Integer(), server_default="0", nullable=False),
        sa.Column("mlflow_parent_run_id", sa.String(length=64), nullable=True),
        _utc("created_at", nullable=False),
        _utc("updated_at", nullable=False),
        _utc("started_at", nullable=True),
        _utc("finished_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f("fk_sweeps_owner_id_owners")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
        sa.CheckConstraint(
            sa.column("status").in_(SWEEP_STATUSES), name=op.f("ck_sweeps_sweep_status")
        ),
        sa.UniqueConstraint(
            "owner_id", "idempotency_key", name=op.f("uq_sweeps_owner_id_idempotency_key")
        ),
    )
    op.create_index("ix_sweeps_owner_id_created_at_id", "sweeps", ["owner_id", "created_at", "id"])
    op.create_index("ix_sweeps_status", "sweeps", ["status"])


def downgrade() -> None:
    op.drop_index("ix_sweeps_status", table_name="sweeps")
    op.drop_index("ix_sweeps_owner_id_created_at_id", table_name="sweeps")
    op.drop_table("sweeps")
    op.drop_index(op.f("ix_api_keys_owner_id"), table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("owners")
