"""Several real processes writing to one database at once: nothing lost, never 'database is locked'."""

from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

from gatekeeper.audit.verify import verify_chain
from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from tests.helpers import draft

WRITERS = 4
SECONDS = 3.0


def _writer(db_path: str, worker: int, seconds: float, out: mp.Queue) -> None:
    """Alternate proposals, identical retries and refusal events until the time is up."""
    made, retries, refusals, errors = [], 0, 0, []
    deadline = time.monotonic() + seconds
    with Store(Path(db_path)) as store:
        i = 0
        while time.monotonic() < deadline:
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
            i += 1
    out.put(json.dumps({"worker": worker, "made": made, "retries": retries, "refusals": refusals, "errors": errors}))


def test_four_processes_write_at_once_and_lose_nothing(home: Home) -> None:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(home.db_path), w, SECONDS, out)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    results = [json.loads(out.get(timeout=120)) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert [r["errors"] for r in results] == [[]] * WRITERS  # no "database is locked", no lost write
    made = [pid for r in results for pid in r["made"]]
    expected_events = len(made) + sum(r["retries"] + r["refusals"] for r in results)
    assert all(len(r["made"]) > 20 for r in results), "every writer must have made real progress"

    conn = sqlite3.connect(home.db_path)
    assert {row[0] for row in conn.execute("SELECT id FROM proposal")} == set(made)
    assert len(set(made)) == len(made)
    created = {row[0] for row in conn.execute("SELECT proposal_id FROM audit_event WHERE kind = 'proposal_created'")}
    assert created == set(made)  # each proposal with its own event, written in the same transaction
    with Reader(home.db_path) as reader:
        report = verify_chain(reader)
    assert report.ok, report.problem
    assert report.count == expected_events
