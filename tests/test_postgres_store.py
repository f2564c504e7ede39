"""What only the PostgreSQL backend has: the chain's advisory lock, a lost connection told apart from
a server's refusal, reconnecting for idempotent writes, and the SQL translation."""

from __future__ import annotations

import threading

import psycopg
import pytest

from gatekeeper.home import Home
from gatekeeper.store import events as ev
from gatekeeper.store import migrate
from gatekeeper.store.backends import DatabaseUnreachable
from gatekeeper.store.postgres import CHAIN_LOCK, to_postgres
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import PostgresUrl
from gatekeeper.store.version import KNOWN_REVISIONS
from tests.helpers import draft, wait_until
from tests.pg_support import PostgresServer


@pytest.fixture
def backend() -> str:
    return "postgres"


def _admin(home: Home) -> psycopg.Connection:
    assert isinstance(home.database, PostgresUrl)
    conn = psycopg.connect(home.database.conninfo, autocommit=True)
    return conn


def _terminate_others(home: Home) -> int:
    """Kill every other session on the database (as a failover or a restart would)."""
    with _admin(home) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_writers_wait_for_the_chain_lock(home: Home, store: Store) -> None:
    """A writer's transaction starts by taking the one advisory lock: while another session holds it,
    the append waits, and then continues the chain from the other's last event."""
    holder = _admin(home)
    try:
        holder.execute("BEGIN")
        holder.execute(f"SELECT pg_advisory_xact_lock({CHAIN_LOCK})")
        done: list[int] = []
        writer = threading.Thread(target=lambda: done.append(store.append_event(ev.INIT, "test").seq))
        writer.start()
        with _admin(home) as watcher:
            wait_until(
                lambda: (
                    watcher.execute(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    ).fetchone()[0]
                    == 1
                ),
                10,
                "the writer to queue on the chain lock",
            )
        assert done == []  # still waiting: the lock, not luck, orders the writers
        holder.execute("COMMIT")
        writer.join(timeout=10)
        assert done == [1]
    finally:
        holder.close()


def test_a_lost_connection_is_reconnected_for_idempotent_writes_and_reported_for_others(
    home: Home, store: Store
) -> None:
    first = store.propose(draft("notes/a.md"))
    assert _terminate_others(home) == 1  # the store's kept connection
    again = store.propose(draft("notes/a.md"))  # reconnects; the proposal is found, not made twice
    assert (again.id, again.created) == (first.id, False)
    assert _terminate_others(home) == 1
    store.append_event(ev.INIT, "test")  # found dead at BEGIN, before anything was sent: a new connection
    lost = pytest.raises(DatabaseUnreachable, match=r"lost the connection to postgresql://gk@")
    with lost as err, store.transaction() as tx:  # lost inside a transaction: not retried (could write twice)
        assert _terminate_others(home) == 1
        tx.append_event(ev.INIT, "test")
    assert "GATEKEEPER_DATABASE_URL" in str(err.value)
    store.append_event(ev.INIT, "test")  # the broken connection was dropped: the next write reconnects
    with Reader(home.database) as reader:
        assert [e[2] for e in reader.events()] == ["proposal_created", "proposal_repeated", "init", "init"]


def test_a_server_refusal_is_not_mistaken_for_a_lost_connection(store: Store) -> None:
    with pytest.raises(psycopg.errors.QueryCanceled), store.transaction() as tx:
        tx.run("SET LOCAL statement_timeout = 10")
        tx.run("SELECT pg_sleep(5)")
    assert store.append_event(ev.INIT, "test").seq == 1  # the same connection goes on


def test_the_reader_reconnects_between_snapshots(home: Home, store: Store) -> None:
    p = store.propose(draft())
    with Reader(home.database) as reader:
        assert reader.has_proposal(p.id)
        _terminate_others(home)
        assert reader.has_proposal(p.id)  # a read outside a snapshot is simply run again
        assert reader.proposal(p.id) is not None


@pytest.mark.parametrize(
    ("sqlite", "postgres"),
    [
        ("SELECT 1 FROM t WHERE a = ? AND b IS ?", "SELECT 1 FROM t WHERE a = %s AND b IS NOT DISTINCT FROM %s"),
        ("WHERE p.expires_at > :now LIMIT :limit", "WHERE p.expires_at > %(now)s LIMIT %(limit)s"),
        ("WHERE e.proposal_id = p.id AND +e.kind = ?", "WHERE e.proposal_id = p.id AND e.kind = %s"),
        ("json_extract(d.assertion, '$.credential_id')", "(d.assertion::json ->> 'credential_id')"),
        ("SELECT 'a?b:c' || x, '100%' FROM t WHERE y = ?", "SELECT 'a?b:c' || x, '100%%' FROM t WHERE y = %s"),
        ("SELECT '\\x00'::bytea", "SELECT '\\x00'::bytea"),
    ],
)
def test_sql_translation(sqlite: str, postgres: str) -> None:
    assert to_postgres(sqlite) == postgres


def test_two_upgrades_at_once_apply_each_revision_once(postgres_server: PostgresServer) -> None:
    """Two machines running ``gatekeeper init`` on one blank database: one migrates, the other
    waits for it and finds nothing left to do; neither fails."""
    with postgres_server.admin() as conn:
        conn.execute("CREATE DATABASE gk_two_inits")
    url = PostgresUrl(postgres_server.cluster.url("gk_two_inits"))
    go, results, errors = threading.Barrier(2), [], []

    def init() -> None:
        go.wait(timeout=10)
        try:
            results.append(migrate.upgrade(url).pending)
        except Exception as exc:
            errors.append(repr(exc))

    try:
        threads = [threading.Thread(target=init) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert sorted(results, key=len) == [(), KNOWN_REVISIONS]  # one applied all, the other none
        assert migrate.status(url).up_to_date
    finally:
        postgres_server.drop(url)
