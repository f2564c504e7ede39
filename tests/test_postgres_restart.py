"""PostgreSQL killed (-9) and restarted while several processes propose: every writer reconnects,
no proposal is lost, none is duplicated, and the chain still verifies.

The server gets a cluster of its own (the session's stays up for the other tests). A connection
lost during COMMIT leaves unknown whether it committed; ``Store.propose`` retries, finds the
proposal pending, and returns it, so a retry never makes a second one.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from gatekeeper.audit.verify import verify_chain
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import PostgresUrl
from tests.helpers import draft, wait_until
from tests.pg_support import Cluster, own_cluster

WRITERS = 4
ITERATIONS = 120
KILLS = 2


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with own_cluster() as own:
        yield own


def _writer(url: str, worker: int, go: Any, out: mp.Queue) -> None:
    """Propose ITERATIONS files (every fifth one twice, as an agent retrying); report ids or errors."""
    made: list[list[str]] = []
    errors: list[str] = []
    with Store(PostgresUrl(url)) as store:
        go.wait(timeout=60)
        for i in range(ITERATIONS):
            try:
                p = store.propose(draft(f"w{worker}/{i}.md", f"{worker}:{i}\n".encode()))
                made.append([f"w{worker}/{i}.md", p.id])
                if i % 5 == 0:
                    again = store.propose(draft(f"w{worker}/{i}.md", f"{worker}:{i}\n".encode()))
                    assert again.id == p.id and not again.created, (again, p)
            except Exception as exc:
                errors.append(repr(exc))
    out.put(json.dumps({"worker": worker, "made": made, "errors": errors}))


def _count(cluster: Cluster) -> int:
    try:
        with psycopg.connect(cluster.conninfo("gk"), autocommit=True, connect_timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM proposal").fetchone()[0])
    except psycopg.OperationalError:
        return -1


@pytest.mark.timeout(300)
def test_writers_survive_a_killed_and_restarted_server(cluster: Cluster) -> None:
    url = cluster.url("gk")
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    go = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(url, w, go, out)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    total = WRITERS * ITERATIONS
    for kill in range(1, KILLS + 1):  # kill while the writers are mid-run, each time a bit later
        wait_until(lambda k=kill: _count(cluster) >= total * k // (KILLS + 2), 120, f"proposals before kill {kill}")
        cluster.kill()
        cluster.start()
    results = [json.loads(out.get(timeout=240)) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert [r["errors"] for r in results] == [[]] * WRITERS  # everyone reconnected; no call failed
    made = dict(pair for r in results for pair in r["made"])
    assert len(made) == total

    with psycopg.connect(cluster.conninfo("gk"), autocommit=True) as conn:
        rows = conn.execute("SELECT path, id FROM proposal").fetchall()
        created = conn.execute("SELECT proposal_id FROM audit_event WHERE kind = 'proposal_created'").fetchall()
    assert len(rows) == total, "a proposal was lost or duplicated"
    assert dict(rows) == made  # one proposal per file, the one its writer was told about
    assert sorted(r[0] for r in created) == sorted(made.values())  # each with its one event
    with Reader(PostgresUrl(url)) as reader:
        report = verify_chain(reader)
    assert report.ok, report.problem
    log = (cluster.base / "log").read_text()
    assert log.count("database system was interrupted") >= KILLS or log.count("not properly shut down") >= KILLS, (
        "the server never went through crash recovery: the kills did not happen mid-run"
    )


def test_the_first_write_after_a_restart_does_not_fail(cluster: Cluster) -> None:
    """The store keeps its writer connection open between transactions; after a restart the
    server has dropped it. The first transaction finds it dead at BEGIN, before anything was sent,
    and takes a new one: no write (not only the idempotent, retrying ones) fails for it."""
    from gatekeeper.store.events import INIT

    with Store(PostgresUrl(cluster.url("gk"))) as store:
        store.append_event(INIT, "test", {"n": 1})  # the connection is now kept open
        cluster.kill()
        cluster.start()
        second = store.append_event(INIT, "test", {"n": 2})  # not retried: must work at once
        with Reader(PostgresUrl(cluster.url("gk"))) as reader:
            payloads = [e[5] for e in reader.events(kind=INIT)]  # (seq, at, kind, actor, proposal_id, payload, ...)
    assert second.seq > 1 and [json.loads(p)["n"] for p in payloads][-2:] == [1, 2]
