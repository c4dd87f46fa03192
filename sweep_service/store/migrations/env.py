"""Alembic's entry point for the store's migrations.

Run through ``sweep_service.store.migrate``, which hands over an open connection in
``config.attributes["connection"]``; there is no ``alembic.ini``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from sweep_service.store.models import Base


def run_migrations(connection: Connection) -> None:
    """Apply the pending migrations over ``connection``, in its transaction."""
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        compare_type=True,
        # SQLite alters a table by copying it; later migrations need batch mode there.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    """Run the migrations on the connection ``migrate.alembic_config`` attached.

    Raises:
        RuntimeError: Alembic was run another way (offline, or from a command line
            with no connection), which the store does not support.
    """
    connection = context.config.attributes.get("connection")
    if context.is_offline_mode() or connection is None:
        raise RuntimeError(
            "run the store's migrations through sweep_service.store.migrate, with a connection"
        )
    run_migrations(connection)


main()
