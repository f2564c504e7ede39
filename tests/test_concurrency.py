"""Several real processes writing to one database at once: nothing lost, never 'database is locked';
on PostgreSQL, writers on one chain under the advisory lock."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from typing import Any

import pytest

from gatekeeper.audit.verify import verify_chain
from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import as_url, parse_database_url
from tests.helpers import draft
from tests.pg_support import BACKENDS, raw

WRITERS = 4
ITERATIONS = 150  # a count, not a time window: a loaded machine is slower, never wrong


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _writer(db: str, worker: int, go: Any, out: mp.Queue) -> None:
    """Alternate proposals, identical retries and refusal events, all writers released together."""
    made, retries, refusals, errors = [], 0, 0, []
    with Store(parse_database_url(db, "the test's database_url")) as store:
        go.wait(timeout=60)  # a barrier: every writer has its store open before any writes
        started = time.monotonic()
        for i in range(ITERATIONS):
            try:
                p = store.propose(draft(f"w{worker}/{i}.md", f"{worker}:{i}\n".encode()))
                made.append(p.id)
                if i % 5 == 0:  # an agent retrying the same call
                    again = store.propose(draft(f"w{worker}/{i}.md", f"{worker}:{i}\n".encode()))
                    assert again.id == p.id and not again.created
                    retries += 1
                store.append_event("tool_denied", f"worker{worker}", {"i": i})
                refusals += 1
            except Exception as exc:
                errors.append(repr(exc))
        ended = time.monotonic()
    out.put(
        json.dumps(
            {
                "worker": worker,
                "made": made,
                "retries": retries,
                "refusals": refusals,
                "errors": errors,
                "span": [started, ended],
            }
        )
    )


def test_four_processes_write_at_once_and_lose_nothing(home: Home) -> None:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    go = ctx.Barrier(WRITERS)
    db = as_url(home.database)
    procs = [ctx.Process(target=_writer, args=(db, w, go, out)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    results = [json.loads(out.get(timeout=120)) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert [r["errors"] for r in results] == [[]] * WRITERS  # no "database is locked", no lost write
    made = [pid for r in results for pid in r["made"]]
    expected_events = len(made) + sum(r["retries"] + r["refusals"] for r in results)
    assert all(len(r["made"]) == ITERATIONS for r in results)
    spans = [r["span"] for r in results]  # monotonic clocks are system-wide on Linux
    assert max(s for s, _ in spans) < min(e for _, e in spans), f"the writers never overlapped: {spans}"

    conn = raw(home)
    assert {row[0] for row in conn.execute("SELECT id FROM proposal")} == set(made)
    assert len(set(made)) == len(made)
    created = {row[0] for row in conn.execute("SELECT proposal_id FROM audit_event WHERE kind = 'proposal_created'")}
    assert created == set(made)  # each proposal with its own event, written in the same transaction
    with Reader(home.database) as reader:
        report = verify_chain(reader)
    assert report.ok, report.problem
    assert report.count == expected_events
