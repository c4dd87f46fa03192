"""Store fixtures: every test that takes ``database_url`` runs on SQLite and on PostgreSQL.

SQLite: a new file per test. PostgreSQL: the server of ``DICESWEEP_TEST_POSTGRES_URL``
(default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``); the test run creates
its own database there, named ``dicesweep_test_<random>``, gives each test a new
schema in it (through the connection's ``search_path``), and drops the database at
the end, so concurrent runs never meet. An unreachable server skips those cases.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from sweep_service.store import (
    Owner,
    create_engine_for,
    create_owner,
    create_session_factory,
    normalise_url,
    upgrade,
)
from tests.service.api_fixtures import (  # noqa: F401 (the API tests' fixtures)
    api,
    installed_datasets,
    make_api,
    tracking,
)

POSTGRES_URL_VARIABLE = "DICESWEEP_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
CONNECT_TIMEOUT_S = 3


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[URL]:
    """A database created for this test run on the configured server, dropped after it."""
    server = normalise_url(os.environ.get(POSTGRES_URL_VARIABLE, DEFAULT_POSTGRES_URL))
    admin = create_engine_for(
        server, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
    )
    name = f"dicesweep_test_{secrets.token_hex(6)}"
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except (OperationalError, ProgrammingError) as error:
        # Unreachable (OperationalError), or no right to create a database (ProgrammingError).
        admin.dispose()
        shown = server.render_as_string(hide_password=True)
        reason = str(error.orig).strip().splitlines()[0]
        pytest.skip(
            f"no PostgreSQL test database at {shown} (set {POSTGRES_URL_VARIABLE}): {reason}"
        )
    try:
        yield server.set(database=name)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[URL]:
    """The URL of an empty database of each backend."""
    if request.param == "sqlite":
        yield make_url(f"sqlite:///{tmp_path / 'store.db'}")
        return
    database: URL = request.getfixturevalue("postgres_database")
    schema = f"test_{secrets.token_hex(6)}"
    admin = create_engine_for(database, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield database.update_query_dict({"options": f"-csearch_path={schema}"})
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


@pytest.fixture
def engine(database_url: URL) -> Iterator[Engine]:
    """An engine on a database migrated to the head revision."""
    engine = create_engine_for(database_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def session_factory(engine: Engine) -> sessionmaker[Session]:
    return create_session_factory(engine)


@pytest.fixture
def session(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    with session_factory() as session:
        yield session


@pytest.fixture
def alice(session: Session) -> Owner:
    return create_owner(session, "alice", max_concurrent_sweeps=50)


@pytest.fixture
def bob(session: Session) -> Owner:
    return create_owner(session, "bob", max_concurrent_sweeps=50)
