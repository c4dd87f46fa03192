"""The store's schema: migrations up and down, agreement with the models, engines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.store import (
    ApiKey,
    Owner,
    create_engine_for,
    create_owner,
    normalise_url,
    upgrade,
)
from sweep_service.store.migrate import alembic_config
from sweep_service.store.models import Base

TABLES = {"owners", "api_keys", "sweeps"}


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def _revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def test_migrations_apply_from_empty_and_downgrade_to_base(database_url: URL) -> None:
    engine = create_engine_for(database_url)
    try:
        assert _tables(engine) == set()
        upgrade(database_url)
        assert _tables(engine) == TABLES
        assert _revision(engine) == "0001"
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "base")
        assert _tables(engine) == set()
        assert _revision(engine) is None
        upgrade(engine)  # and up again, on an engine the caller keeps
        assert _tables(engine) == TABLES
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_upgrading_twice_changes_nothing(engine: Engine) -> None:
    upgrade(engine)
    assert _revision(engine) == "0001"


def test_foreign_keys_are_enforced(session: Session) -> None:
    orphan = ApiKey(owner_id=12345, prefix="0" * 12, secret_hash="0" * 64, created_at=_now())
    session.add(orphan)
    with pytest.raises(IntegrityError):
        session.flush()
    session.rollback()


def test_timestamps_come_back_timezone_aware_in_utc(
    session: Session, session_factory: sessionmaker[Session]
) -> None:
    created = datetime(2025, 3, 1, 12, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    owner = create_owner(session, "carol", now=created)
    with session_factory() as fresh:
        stored = fresh.get(Owner, owner.id)
        assert stored is not None
        assert stored.created_at == created
        assert stored.created_at.tzinfo is UTC
        assert stored.created_at.hour == 10


def test_naive_timestamps_are_refused(session: Session) -> None:
    with pytest.raises(StatementError, match="naive datetime"):
        create_owner(session, "dave", now=datetime(2025, 3, 1, 12, 0))
    assert session.scalars(select(Owner)).all() == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u@db:5432/x", "postgresql+psycopg://u@db:5432/x"),
        ("postgres://u@db/x", "postgresql+psycopg://u@db/x"),
        ("postgresql+psycopg://u@db/x", "postgresql+psycopg://u@db/x"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
    ],
)
def test_postgres_urls_are_pointed_at_psycopg(given: str, expected: str) -> None:
    assert normalise_url(given).render_as_string(hide_password=False) == expected


def test_a_sqlite_store_creates_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "home" / "nested" / "dicesweep.db"
    upgrade(f"sqlite:///{path}")
    assert path.is_file()


def _now() -> datetime:
    return datetime.now(UTC)
