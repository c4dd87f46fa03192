"""Sweeps count their stopped trials (MLflow's KILLED: stopped by a cancel) apart from
the failed ones, so the API and both pages count a cancelled sweep's trials alike.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27

A sweep stored before keeps its killed trials among ``trials_failed`` until the
reconciler reads its progress again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(
            sa.Column("trials_stopped", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("trials_stopped")
