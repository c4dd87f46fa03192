"""A finished sweep keeps its trials' rows.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25

The reconciler stores them when it reads a finished sweep for the last time, so the
sweep's table and trials are served without MLflow (``GET /v1/sweeps/{id}/grid``
answers during an MLflow outage). Sweeps that finished before this revision keep
being read from MLflow.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("trial_rows", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("trial_rows")
