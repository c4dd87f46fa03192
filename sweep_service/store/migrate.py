"""Schema migrations (Alembic), shipped inside the package and configured in code.

The service calls ``upgrade(settings.database_url)`` at start-up. A new revision is
written from a store at the current head::

    with create_engine_for(url).begin() as connection:
        command.revision(alembic_config(connection), message="...", autogenerate=True)

then reviewed by hand, and ``versions/`` keeps it.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from sweep_service.store.database import create_engine_for

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection) -> Config:
    """An Alembic configuration whose scripts are the package's and whose ``env.py``
    migrates over ``connection`` (in the connection's transaction)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def upgrade(database: str | URL | Engine, revision: str = "head") -> None:
    """Migrate the store at ``database`` (a URL, or an engine to reuse) to ``revision``,
    in one transaction where the backend allows DDL in one (PostgreSQL, SQLite).

    Raises:
        alembic.util.CommandError: an unknown ``revision``.
        sqlalchemy.exc.OperationalError: the database cannot be reached.
    """
    engine = database if isinstance(database, Engine) else create_engine_for(database)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), revision)
    finally:
        if engine is not database:
            engine.dispose()
