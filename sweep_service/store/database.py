"""Engines, sessions and the one way the store commits a write.

SQLite (the embedded default) and PostgreSQL through psycopg 3 are supported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.store.errors import ConflictError

SQLITE_BUSY_TIMEOUT_S = 15.0  # how long a transaction waits for SQLite's one write lock
CONNECT_TIMEOUT_S = 5  # how long a connection to a PostgreSQL server is attempted
# The connection option that makes a SQLite transaction start as a writer (``committing``).
WRITE_OPTION = "dicesweep_write"

# Error names of a broken unique rule: PostgreSQL's SQLSTATE, and SQLite's extended
# result codes (the primary key is a unique rule of its own there).
_PG_UNIQUE_VIOLATION = "23505"
_SQLITE_UNIQUE_VIOLATIONS = frozenset({"SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"})


def normalise_url(database_url: str | URL) -> URL:
    """``database_url`` with PostgreSQL pointed at psycopg 3: ``postgresql://`` and
    ``postgres://`` become ``postgresql+psycopg://``; other URLs are unchanged.

    Raises:
        sqlalchemy.exc.ArgumentError: a string that is not a database URL.
    """
    url = make_url(database_url)
    if url.drivername in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg")
    return url


def create_engine_for(database_url: str | URL, **engine_options: Any) -> Engine:
    """An engine for the store at ``database_url`` (see ``normalise_url``).

    On SQLite, foreign keys are enforced, the file's folder is created, and the
    database is in WAL mode, so readers never wait for the writer nor it for them.
    SQLite has one write lock per database: a transaction that writes (everything
    inside ``committing``) starts with ``BEGIN IMMEDIATE``, taking the lock before its
    first read, so writers wait their turn (up to ``SQLITE_BUSY_TIMEOUT_S``) instead
    of failing with "database is locked", and a check followed by a write (quota,
    idempotency key) is atomic. Other transactions start with a plain ``BEGIN`` and
    read a snapshot without any lock. ``engine_options`` go to
    ``sqlalchemy.create_engine``.

    On PostgreSQL, a pooled connection is tested before use (a restarted server costs
    one reconnect, not an error) and a connection attempt gives up after
    ``CONNECT_TIMEOUT_S``.
    """
    url = normalise_url(database_url)
    if url.get_backend_name() != "sqlite":
        # A server that does not answer fails a request within the timeout, not never.
        server_args = {
            "connect_timeout": CONNECT_TIMEOUT_S,
            **engine_options.pop("connect_args", {}),
        }
        return create_engine(url, pool_pre_ping=True, connect_args=server_args, **engine_options)
    _create_sqlite_folder(url)
    file_args = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S}
    engine = create_engine(url, connect_args=file_args, **engine_options)
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin)
    return engine


def _create_sqlite_folder(url: URL) -> None:
    """Create the folder of a file database (not one in memory)."""
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _configure_sqlite_connection(dbapi_connection: Any, connection_record: Any) -> None:
    # The driver's own implicit BEGIN is turned off so that the "begin" event below
    # decides how a transaction starts (SQLAlchemy's documented pysqlite recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.execute("PRAGMA journal_mode = WAL")  # kept by the file; "memory" in memory
    # In WAL mode, NORMAL syncs at checkpoints rather than at every commit: a crash of
    # the process loses nothing and the file never corrupts; only a power cut can
    # undo the last commits (SQLite's advice for WAL). Deployments use PostgreSQL.
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def _begin(connection: Any) -> None:
    writing = connection.get_execution_options().get(WRITE_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")


def _begin_writing(session: Session) -> None:
    """On SQLite, make the session's transaction one that started as a writer: a
    read-only transaction in progress is ended first (its objects stay loaded), since
    a snapshot reader that then writes fails at once when another writer committed
    in between. Other databases lock rows (``FOR UPDATE``) and need nothing here."""
    if session.get_bind().dialect.name != "sqlite":
        return
    if session.in_transaction():
        if session.connection().get_execution_options().get(WRITE_OPTION, False):
            return
        session.commit()
    session.connection(execution_options={WRITE_OPTION: True})


def create_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions on ``engine`` whose objects stay readable after a commit, so a caller
    can answer with the rows a store function wrote."""
    return sessionmaker(bind=engine, expire_on_commit=False)


def is_unique_violation(error: IntegrityError) -> bool:
    """Whether ``error`` is a broken unique rule (not a NOT NULL, CHECK or foreign key)."""
    original = error.orig
    if getattr(original, "sqlstate", None) == _PG_UNIQUE_VIOLATION:
        return True
    return getattr(original, "sqlite_errorname", None) in _SQLITE_UNIQUE_VIOLATIONS


@contextmanager
def committing(
    session: Session, conflict: str = "the write conflicts with an existing row"
) -> Iterator[None]:
    """Commit what the block writes, or roll all of it back if anything fails. The
    block runs in a writing transaction (on SQLite, one holding the write lock from
    its first statement), so what it reads stays true until the commit.

    Raises:
        ConflictError: a unique rule refused the write; ``conflict`` is its message.
    """
    _begin_writing(session)
    try:
        yield
        session.commit()
    except IntegrityError as error:
        session.rollback()
        if is_unique_violation(error):
            raise ConflictError(conflict) from error
        raise
    except BaseException:
        session.rollback()
        raise
