"""``StatementReader``: reads of one row by one statement, as cheap as the store allows.

Every client of a running sweep polls it, so the poll's one read is the store's
hottest path. On the embedded SQLite store most of its cost was SQLAlchemy's
execution machinery around a statement SQLite answers in microseconds; the reader
compiles each statement once and runs it on a connection it keeps, applying the
columns' own result processors (the same ``TypeEngine.result_processor`` that
SQLAlchemy applies), so rows read alike either way.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import namedtuple
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Dialect, Engine, Select
from sqlalchemy.exc import DBAPIError, MultipleResultsFound
from sqlalchemy.pool import PoolProxiedConnection

from sweep_service.store.database import SINGLE_READ_OPTION, names_a_file, sqlite_engine

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True)
class _Compiled:
    """A statement as the held connection runs it."""

    sql: str
    binds: tuple[tuple[str, Processor], ...]  # each parameter's name and bind processor
    processors: tuple[Processor, ...]  # each column's result processor
    row: Callable[..., Any]  # a named tuple of the statement's columns


class StatementReader:
    """Reads of one row by one statement against ``engine``'s store.

    On a SQLite file each thread holds one connection of its own, opened on its
    first read on a second engine without ``engine``'s transaction events; each
    statement is compiled once and runs on that connection as it stands, without
    a pool checkout, a BEGIN or SQLAlchemy's execution context (about 30% of the
    app's time on a poll). SQLite in autocommit mode reads the latest commit in
    each statement, and every statement is read to its end, so an idle connection
    holds no snapshot that would keep a writer or a checkpoint waiting. Elsewhere
    (PostgreSQL, SQLite in memory) each read takes a connection from ``engine``'s
    pool and runs through SQLAlchemy as usual.

    Statements are ``select()`` constructs with plain bound parameters (no
    expanding ``IN``), used as the keys of a cache: build each once, at import.
    """

    def __init__(self, engine: Engine) -> None:
        self._held = engine.dialect.name == "sqlite" and names_a_file(engine.url)
        self.engine = sqlite_engine(engine.url) if self._held else engine
        self._local = threading.local()
        self._opened: list[PoolProxiedConnection] = []
        self._compiled: dict[Select[Any], _Compiled] = {}
        self._guard = threading.Lock()

    def one(self, statement: Select[Any], params: Mapping[str, Any]) -> Any | None:
        """The one row ``statement`` selects with ``params``, or None; its columns are
        attributes by name.

        Raises:
            ValueError: on a SQLite file, a statement with an expanding parameter.
            sqlalchemy.exc.MultipleResultsFound: more than one row.
            sqlalchemy.exc.DBAPIError: the database refused the statement.
        """
        if not self._held:
            with self.engine.connect() as connection:
                connection.execution_options(**{SINGLE_READ_OPTION: True})
                return connection.execute(statement, params).one_or_none()
        compiled = self._compiled.get(statement) or self._compile(statement)
        values = {
            name: params[name] if process is None else process(params[name])
            for name, process in compiled.binds
        }
        held = self._held_connection()
        try:
            driver = cast(sqlite3.Connection, held.driver_connection)
            rows = driver.execute(compiled.sql, values).fetchall()
        except self.engine.dialect.loaded_dbapi.Error as error:
            self._drop(held)  # the next read opens another
            raise DBAPIError.instance(
                compiled.sql, values, error, self.engine.dialect.loaded_dbapi.Error
            ) from error
        if not rows:
            return None
        if len(rows) > 1:
            raise MultipleResultsFound("the statement selected more than one row")
        return compiled.row(
            *(value if process is None else process(value)
              for process, value in zip(compiled.processors, rows[0], strict=True))
        )  # fmt: skip

    def _compile(self, statement: Select[Any]) -> _Compiled:
        dialect = self.engine.dialect
        # SQLite binds by name as well as by position: SQL with ``:name`` parameters.
        named = cast(Callable[..., Dialect], type(dialect))(paramstyle="named")
        compiled = statement.compile(dialect=named)
        expanding = [name for name, bind in compiled.binds.items() if bind.expanding]
        if expanding:
            raise ValueError(f"expanding parameters are not supported: {', '.join(expanding)}")
        binds = tuple(
            (name, bind.type.dialect_impl(dialect).bind_processor(dialect))
            for name, bind in compiled.binds.items()
        )
        columns = list(statement.selected_columns)
        processors = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns
        )
        row = namedtuple("Row", [column.key for column in columns])  # type: ignore[misc]
        entry = _Compiled(compiled.string, binds, processors, row)
        self._compiled[statement] = entry
        return entry

    def _held_connection(self) -> PoolProxiedConnection:
        """This thread's held connection, opened on its first read."""
        held: PoolProxiedConnection | None = getattr(self._local, "connection", None)
        if held is None:
            held = self._local.connection = self.engine.raw_connection()
            with self._guard:
                self._opened.append(held)
        return held

    def _drop(self, held: PoolProxiedConnection) -> None:
        """Discard this thread's held connection ``held``."""
        self._local.connection = None
        with self._guard:
            self._opened.remove(held)
        held.invalidate()
        held.close()

    def close(self) -> None:
        """Give the held connections back (a later read opens another)."""
        with self._guard:
            opened, self._opened = self._opened, []
        self._local = threading.local()
        for held in opened:
            held.close()
        if self._held:
            self.engine.dispose()
