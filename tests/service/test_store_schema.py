"""The store's schema: migrations up and down, agreement with the models, engines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, MetaData, Table, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.store import (
    ApiKey,
    Owner,
    Sweep,
    create_engine_for,
    create_owner,
    list_unsynced_finished_sweeps,
    normalise_url,
    upgrade,
)
from sweep_service.store.migrate import alembic_config
from sweep_service.store.models import Base

HEAD = "0005"  # the newest migration
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
        assert _revision(engine) == HEAD
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "base")
        assert _tables(engine) == set()
        assert _revision(engine) is None
        upgrade(engine)  # and up again, on an engine the caller keeps
        assert _tables(engine) == TABLES
    finally:
        engine.dispose()


def test_sweeps_stored_before_progress_was_kept_are_upgraded_with_none(
    database_url: URL,
) -> None:
    engine = create_engine_for(database_url)
    try:
        upgrade(engine, "0001")
        tables = MetaData()
        owners = Table("owners", tables, autoload_with=engine)
        sweeps = Table("sweeps", tables, autoload_with=engine)
        now = datetime.now(UTC)
        with engine.begin() as connection:
            connection.execute(owners.insert().values(id=1, name="old", created_at=now))
            connection.execute(
                sweeps.insert().values(
                    id="sw-old", owner_id=1, name="old", spec={}, spec_sha256="0" * 64,
                    resolved_spec={}, trial_count=3, gpus_per_trial=0.0, status="succeeded",
                    resubmissions=0, created_at=now, updated_at=now, finished_at=now,
                )
            )  # fmt: skip
        upgrade(engine)
        with Session(engine) as session:
            sweep = session.get(Sweep, "sw-old")
            assert sweep is not None and sweep.trial_count == 3
            assert (sweep.trials_running, sweep.trials_done, sweep.trials_failed) == (0, 0, 0)
            assert sweep.best_trial is None and sweep.trials_synced_at is None
            assert sweep.tuning is None  # a sweep without tune
            assert sweep.trial_rows is None  # read from MLflow until read once more
            # The reconciler's next pass reads its progress once.
            assert [s.id for s in list_unsynced_finished_sweeps(session)] == ["sw-old"]
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_upgrading_twice_changes_nothing(engine: Engine) -> None:
    upgrade(engine)
    assert _revision(engine) == HEAD


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
