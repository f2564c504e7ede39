"""PostgreSQL for the store suite: one throwaway cluster per test session, a fresh database per test.

The cluster (scripts/postgres.py) runs on a Unix socket in a temporary folder. A template database
is migrated once; each test gets ``CREATE DATABASE ... TEMPLATE`` of it (a file copy, ~10 ms), so
every test starts from the blank schema without running the migrations again.

A test module runs on both backends by overriding the ``backend`` fixture (see ``BACKENDS``);
``raw`` opens a plain DB-API connection to a home's database, as an attacker with the database would.
"""

from __future__ import annotations

import itertools
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from gatekeeper.store import migrate
from gatekeeper.store.target import Database, PostgresUrl
from tests.helpers import close_at_teardown
from tests.requirements import missing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from postgres import Cluster, PostgresUnavailable, install

__all__ = ["BACKENDS", "Cluster", "PostgresUnavailable", "install"]

BACKENDS = ["sqlite", "postgres"]
TEMPLATE = "gk_template"
_names = itertools.count(1)


class PostgresServer:
    """The session's cluster and its migrated template."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.cluster.conninfo("postgres"), autocommit=True)

    def new_database(self, template: str = TEMPLATE) -> PostgresUrl:
        name = f"gk_test_{next(_names)}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
        return PostgresUrl(self.cluster.url(name))

    def drop(self, url: PostgresUrl) -> None:
        name = database_name(url)
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    try:
        cluster = Cluster(install()).start()
    except PostgresUnavailable as exc:
        missing("PostgreSQL", f"{exc} (`make postgres` installs it)")
    server = PostgresServer(cluster)
    try:
        with server.admin() as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        migrate.upgrade(PostgresUrl(cluster.url(TEMPLATE)))
        yield server
    finally:
        cluster.remove()


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[PostgresUrl]:
    """A fresh database at the head revision, dropped after the test."""
    url = postgres_server.new_database()
    yield url
    postgres_server.drop(url)


class RawPostgres:
    """psycopg in autocommit (each statement alone), taking the same ``?`` SQL as sqlite3."""

    def __init__(self, url: PostgresUrl) -> None:
        import psycopg

        self._conn = psycopg.connect(url.conninfo, autocommit=True)

    def execute(self, sql: str, params: Any = ()) -> Any:
        from gatekeeper.store.postgres import to_postgres

        return self._conn.execute(to_postgres(sql), params)

    def commit(self) -> None:
        """Each statement committed already."""

    def rollback(self) -> None:
        """Nothing open to roll back."""

    def close(self) -> None:
        self._conn.close()


def connect_now(db: Database) -> Any:
    """A plain DB-API connection that the caller closes (``connect`` closes at the test's end)."""
    return RawPostgres(db) if isinstance(db, PostgresUrl) else sqlite3.connect(db)


def connect(db: Database) -> Any:
    """A plain DB-API connection, as an attacker with the database would have, closed when the test ends."""
    conn: Any = RawPostgres(db) if isinstance(db, PostgresUrl) else sqlite3.connect(db)
    close_at_teardown(conn.close)
    return conn


def raw(home: Home) -> Any:
    """``connect`` to the home's database."""
    return connect(home.database)


class Copies:
    """A pristine database and throwaway copies of it (SQLite: the file; PostgreSQL: CREATE DATABASE
    ... TEMPLATE), for tests that tamper with a copy each. ``close`` drops every PostgreSQL copy."""

    def __init__(self, source: Database, server: PostgresServer | None = None) -> None:
        self.source, self.server = source, server
        self.made: list[PostgresUrl] = []

    def copy(self, dest: Path) -> Database:
        if self.server is None:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.source, dest / "gatekeeper.db")
            return dest / "gatekeeper.db"
        assert isinstance(self.source, PostgresUrl)
        url = self.server.new_database(template=database_name(self.source))
        self.made.append(url)
        return url

    def close(self) -> None:
        for url in self.made:
            assert self.server is not None
            self.server.drop(url)


@contextmanager
def own_cluster(database: str = "gk", *, migrated: bool = True) -> Iterator[Cluster]:
    """A cluster of the test's own, to kill and restart (the session's stays up for the other
    tests), holding one database, migrated unless the test migrates it its own way."""
    try:
        own = Cluster(install()).start()
    except PostgresUnavailable as exc:
        missing("PostgreSQL", f"{exc} (`make postgres` installs it)")
    try:
        import psycopg

        with psycopg.connect(own.conninfo(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        if migrated:
            migrate.upgrade(PostgresUrl(own.url(database)))
        yield own
    finally:
        own.remove()


def database_name(url: PostgresUrl) -> str:
    return url.url.split("/")[3].split("?")[0]


def integrity_error(home: Home) -> type[Exception]:
    """What a refused statement raises on the home's backend."""
    if isinstance(home.database, PostgresUrl):
        import psycopg

        return psycopg.IntegrityError
    return sqlite3.IntegrityError


def blob(home: Home, hex_digits: str) -> str:
    """A bytes literal in the home's dialect."""
    return f"'\\x{hex_digits}'::bytea" if isinstance(home.database, PostgresUrl) else f"x'{hex_digits}'"
