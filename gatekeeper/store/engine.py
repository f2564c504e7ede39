"""The SQLAlchemy engine Alembic migrates through, with the writer's settings.

Only ``migrate`` (``gatekeeper init`` and ``gatekeeper db``) uses it; every other writer goes
through ``connections.WriterPool`` (plain sqlite3) and never loads SQLAlchemy.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import Engine, create_engine, event

from gatekeeper.store.connections import configure
from gatekeeper.store.target import Database, PostgresUrl


def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
    configure(dbapi_conn)


def make_engine(db_path: Database) -> Engine:
    """An engine whose every transaction (Alembic's included) is BEGIN IMMEDIATE; on PostgreSQL,
    one that takes the chain's advisory lock first, so a migration never runs beside a writer."""
    if isinstance(db_path, PostgresUrl):
        return _postgres_engine(db_path)
    engine = create_engine(f"sqlite:///{db_path}", pool_size=1, max_overflow=4)
    event.listen(engine, "connect", _on_connect)

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _postgres_engine(url: PostgresUrl) -> Engine:
    from gatekeeper.store.postgres import CHAIN_LOCK

    engine = create_engine(url.sqlalchemy_url, pool_size=1, max_overflow=4)

    @event.listens_for(engine, "begin")
    def _lock(conn: Any) -> None:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({CHAIN_LOCK})")

    return engine
