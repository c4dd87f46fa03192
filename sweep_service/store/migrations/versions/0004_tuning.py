"""Sweeps keep the state of their two-stage tuning (search_spaces.tuning): the stage
that runs and each loss's chosen settings.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25

The reconciler fills it from MLflow with the rest of the trials' progress; a sweep
without ``tune`` keeps it null.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("tuning", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("tuning")
