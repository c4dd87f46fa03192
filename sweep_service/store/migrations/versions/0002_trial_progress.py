"""Sweeps keep their trials' progress (counts by state, best trial, MLflow ids); an
index for the count of an owner's active sweeps.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

The reconciler fills these from MLflow; ``GET /v1/sweeps/{id}`` reads them, so a poll
never searches MLflow. Sweeps from before this revision are filled on the
reconciler's next pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNTS = ("trials_running", "trials_done", "trials_failed")


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("mlflow_experiment_id", sa.String(length=64), nullable=True))
        for name in COUNTS:
            batch.add_column(sa.Column(name, sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("best_trial", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("trials_synced_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_sweeps_owner_id_status", "sweeps", ["owner_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_sweeps_owner_id_status", table_name="sweeps")
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("trials_synced_at")
        batch.drop_column("best_trial")
        for name in reversed(COUNTS):
            batch.drop_column(name)
        batch.drop_column("mlflow_experiment_id")
