"""Alembic environment: Gatekeeper always hands us an open connection (see gatekeeper.store.migrate)."""

from __future__ import annotations

from alembic import context

from gatekeeper.store.schema import SQLModel

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only `alembic` run by hand
    raise SystemExit("run migrations through `gatekeeper db upgrade`, not the alembic command")

context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    transaction_per_migration=True,  # each revision and its version row commit together
    render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies tables
)
context.run_migrations()
