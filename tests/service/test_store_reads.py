"""StatementReader: the same rows as SQLAlchemy reads, on both stores; on a SQLite file,
one held connection per thread that never holds a snapshot between reads."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Engine, bindparam, event, literal_column, select, table, update
from sqlalchemy.exc import DBAPIError, MultipleResultsFound
from sqlalchemy.orm import Session

from sweep_service.store import (
    Owner,
    StatementReader,
    Sweep,
    SweepStatus,
    create_engine_for,
    create_owner,
    create_sweep,
    transition_sweep,
    upgrade,
)
from tests.service.factories import BEST_TRIAL, make_draft, sweep_in_progress

# Every column type the store has (text, integer, float, enum, JSON, UTC times and
# NULLs), and a UTC time bound as a parameter.
EVERY_COLUMN = select(*Sweep.__table__.c).where(
    Sweep.owner_id == bindparam("owner_id"), Sweep.created_at <= bindparam("before")
)
ONE = select(literal_column("1").label("one"))


@pytest.fixture
def reader(engine: Engine) -> Iterator[StatementReader]:
    reader = StatementReader(engine)
    yield reader
    reader.close()


@pytest.fixture
def file_store(tmp_path: Path) -> Iterator[tuple[Engine, StatementReader, list[object]]]:
    """A SQLite file store, its reader and the connections the reader opened."""
    engine = create_engine_for(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade(engine)
    reader = StatementReader(engine)
    opened: list[object] = []
    event.listen(reader.engine, "connect", lambda dbapi, _record: opened.append(dbapi))
    yield engine, reader, opened
    reader.close()
    engine.dispose()


def test_rows_read_as_sqlalchemy_reads_them(
    engine: Engine, reader: StatementReader, session: Session, alice: Owner
) -> None:
    sweep = sweep_in_progress(session, alice.id)
    # Bound in a zone behind UTC: the column's bind processor turns it into UTC (its
    # wall time as written would come before the sweep's).
    later = sweep.created_at.astimezone(timezone(timedelta(hours=-5))) + timedelta(minutes=1)
    params = {"owner_id": alice.id, "before": later}
    row = reader.one(EVERY_COLUMN, params)
    with engine.connect() as connection:
        expected = connection.execute(EVERY_COLUMN, params).one()
    assert row is not None and row._fields == expected._fields
    assert tuple(row) == tuple(expected)
    assert row.status is SweepStatus.SUBMITTED and row.best_trial == BEST_TRIAL
    assert row.gpus_per_trial == 0.25 and row.finished_at is None
    assert row.created_at.tzinfo is not None and row.trials_synced_at.tzinfo is not None
    earlier = {"owner_id": alice.id, "before": sweep.created_at - timedelta(seconds=1)}
    assert reader.one(EVERY_COLUMN, earlier) is None


def test_more_than_one_row_is_an_error(
    reader: StatementReader, session: Session, alice: Owner
) -> None:
    for name in ("a", "b"):
        create_sweep(session, alice.id, make_draft(name))
    with pytest.raises(MultipleResultsFound):
        reader.one(EVERY_COLUMN, {"owner_id": alice.id, "before": datetime.now(UTC)})


def test_each_read_sees_the_latest_commit(
    engine: Engine, reader: StatementReader, session: Session, alice: Owner
) -> None:
    # A SQLite file gets an engine of its own for reads; PostgreSQL keeps the one.
    assert (reader.engine is engine) == (engine.dialect.name != "sqlite")
    sweep = create_sweep(session, alice.id, make_draft("seen")).sweep
    params = {"owner_id": alice.id, "before": datetime.now(UTC)}
    assert reader.one(EVERY_COLUMN, params).status is SweepStatus.PENDING
    transition_sweep(session, sweep.id, SweepStatus.CANCELLED)
    assert reader.one(EVERY_COLUMN, params).status is SweepStatus.CANCELLED
    # Another process's commit (a second engine on the same store) is seen too.
    other = create_engine_for(engine.url)
    try:
        with other.begin() as connection:
            connection.execute(update(Sweep).values(message="from elsewhere"))
    finally:
        other.dispose()
    assert reader.one(EVERY_COLUMN, params).message == "from elsewhere"


def test_a_failed_statement_raises_and_the_next_read_works(reader: StatementReader) -> None:
    missing = select(literal_column("nothing")).select_from(table("nowhere"))
    with pytest.raises(DBAPIError, match="nowhere"):
        reader.one(missing, {})
    assert reader.one(ONE, {}) == (1,)


def test_a_sqlite_file_reader_holds_one_connection_per_thread(
    file_store: tuple[Engine, StatementReader, list[object]],
) -> None:
    _, reader, opened = file_store
    for _ in range(5):
        assert reader.one(ONE, {}).one == 1
    assert len(opened) == 1  # opened on the first read, then kept
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(reader.one, ONE, {}).result() == (1,)
    assert len(opened) == 2  # another thread, a connection of its own
    assert reader.one(ONE, {}) == (1,)
    assert len(opened) == 2
    reader.close()
    assert reader.one(ONE, {}) == (1,)
    assert len(opened) == 3  # a read after close opens another


def test_a_sqlite_file_reader_refuses_expanding_parameters(
    file_store: tuple[Engine, StatementReader, list[object]],
) -> None:
    _, reader, _ = file_store
    among = select(Sweep.id).where(Sweep.id.in_(bindparam("ids", expanding=True)))
    with pytest.raises(ValueError, match="expanding parameters are not supported: ids"):
        reader.one(among, {"ids": ["sw-1"]})


def test_a_failed_statement_replaces_the_held_connection(
    file_store: tuple[Engine, StatementReader, list[object]],
) -> None:
    _, reader, opened = file_store
    reader.one(ONE, {})
    with pytest.raises(DBAPIError):
        reader.one(select(literal_column("nothing")).select_from(table("nowhere")), {})
    assert reader.one(ONE, {}) == (1,)
    assert len(opened) == 2


def test_a_held_connection_keeps_no_writer_or_checkpoint_waiting(
    file_store: tuple[Engine, StatementReader, list[object]],
    tmp_path: Path,
) -> None:
    engine, reader, _ = file_store
    with Session(engine) as session:
        owner = create_owner(session, "carol")
        create_sweep(session, owner.id, make_draft("a"))
        params = {"owner_id": owner.id, "before": datetime.now(UTC)}
        assert reader.one(EVERY_COLUMN, params) is not None
        create_sweep(session, owner.id, make_draft("b"))  # a writer commits meanwhile
    # A checkpoint must wait for every reader that holds a snapshot: it finds none.
    with contextlib.closing(sqlite3.connect(tmp_path / "store.db")) as other:
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0
