"""The PostgreSQL backend (team mode): psycopg 3, loaded only for a ``postgresql+psycopg://`` database.

One chain, many writers on many machines: every writing transaction is READ COMMITTED and first
takes ``pg_advisory_xact_lock(CHAIN_LOCK)``, held until COMMIT or ROLLBACK. That is SQLite's
``BEGIN IMMEDIATE`` again: one writer at a time, so the chain's next seq and prev_hash are read
and written by one transaction, and ids from sequences are handed out in commit order (the
committer's "decision ids only grow" holds). READ COMMITTED, not REPEATABLE READ: each statement
after the lock sees every transaction committed before the lock was granted, where a repeatable
read snapshot would date from before the wait. SERIALIZABLE with retries was the alternative; every
writing transaction appends to the same chain head, so they would all conflict and retry anyway.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import pq

from gatekeeper.store.backends import LOST_HINT, DatabaseUnreachable
from gatekeeper.store.target import PostgresUrl

CHAIN_LOCK = 0x6761_7465_6B65_6570  # 'gatekeep': the one advisory lock every Gatekeeper writer takes
CHANGE_CHANNEL = "gatekeeper_change"  # NOTIFYed by every writing transaction (``store.listen``)
MIGRATION_LOCK = CHAIN_LOCK + 1  # held by ``migrate.upgrade`` for a whole upgrade (a session lock)
CONNECT_TIMEOUT = 10  # seconds

_IS_PARAM = re.compile(r"\bIS \?")
_PLANNER_HINT = re.compile(r"(?<![\w)'])\+(?=[a-z_]+\.[a-z_]+)")  # SQLite's '+e.kind' (skip that index)
_JSON_FIELD = re.compile(r"json_extract\(([\w.]+), '\$\.(\w+)'\)")


@lru_cache(maxsize=1024)
def to_postgres(sql: str) -> str:
    """The store's SQLite-dialect SQL for psycopg: ``?``→``%s``, ``:name``→``%(name)s``, ``%``→``%%``,
    ``IS ?``→``IS NOT DISTINCT FROM``, ``json_extract(c, '$.k')``→``(c::json ->> 'k')``, no ``+`` hints."""
    sql = _IS_PARAM.sub("IS NOT DISTINCT FROM ?", sql)
    sql = _PLANNER_HINT.sub("", sql)
    sql = _JSON_FIELD.sub(r"(\1::json ->> '\2')", sql)
    out: list[str] = []
    i, quoted = 0, False
    while i < len(sql):
        c = sql[i]
        if c == "'":
            quoted = not quoted
        elif c == "%":
            c = "%%"  # psycopg reads % as a placeholder everywhere, even inside literals
        elif quoted:
            pass
        elif c == "?":
            c = "%s"
        elif c == ":" and i + 1 < len(sql) and (sql[i + 1].isalpha() or sql[i + 1] == "_") and sql[i - 1] != ":":
            end = i + 1
            while end < len(sql) and (sql[end].isalnum() or sql[end] == "_"):
                end += 1
            c, i = f"%({sql[i + 1 : end]})s", end - 1
        out.append(c)
        i += 1
    return "".join(out)


class PostgresBackend:
    name = "postgresql"
    translate = staticmethod(to_postgres)
    integrity_errors: tuple[type[BaseException], ...] = (psycopg.IntegrityError,)
    lost_errors: tuple[type[BaseException], ...] = (psycopg.OperationalError, psycopg.InterfaceError)
    snapshot_begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    # Every state change appends to the chain, so the head's seq moves with (nearly) every commit;
    # a change that appends nothing is caught by the waiters' fallback re-query.
    data_version_sql = "SELECT coalesce(max(seq), 0) FROM audit_event"

    def __init__(self, database: PostgresUrl) -> None:
        self.database = database

    def connect(self, *, read_only: bool = False) -> psycopg.Connection[Any]:
        """An autocommit connection (we issue BEGIN ourselves), or a clear error naming what to check."""
        try:
            conn = psycopg.connect(self.database.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DatabaseUnreachable(f"cannot connect to {self.database}: {first}", LOST_HINT) from None
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
        return conn

    def connect_writer(self) -> psycopg.Connection[Any]:
        return self.connect()

    def connect_reader(self) -> psycopg.Connection[Any]:
        """Read-only by session default: ``audit`` can never write, even by mistake."""
        return self.connect(read_only=True)

    def begin_write(self, cursor: psycopg.Cursor[Any]) -> None:
        """READ COMMITTED, the chain lock, and the change signal: a NOTIFY queued now is delivered at
        COMMIT (never on ROLLBACK) to every ``store.listen`` listener, so waiters wake without polling."""
        cursor.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        cursor.execute(f"SELECT pg_advisory_xact_lock({CHAIN_LOCK}); NOTIFY {CHANGE_CHANNEL}")

    def in_transaction(self, conn: psycopg.Connection[Any]) -> bool:
        return conn.info.transaction_status != pq.TransactionStatus.IDLE

    def reusable(self, conn: psycopg.Connection[Any]) -> bool:
        return not (conn.closed or conn.broken)


def current_revision(database: PostgresUrl) -> str | None:
    """The Alembic revision stamped in the database, or None for a blank one (no alembic_version)."""
    with PostgresBackend(database).connect(read_only=True) as conn:
        if conn.execute("SELECT to_regclass('alembic_version')").fetchone() == (None,):
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return str(row[0]) if row else None
