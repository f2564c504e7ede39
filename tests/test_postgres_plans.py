"""PostgreSQL plans the proposal listing without parallel workers (migration 0010).

At 1,000,000 events the planner ran ``audit proposals --status pending`` as a Gather Merge, and
starting the workers cost 15-80 ms for ~1 ms of work (bench/team_bench.py T4). Here the planner
is told parallel plans cost nothing, so only the tables' ``parallel_workers = 0`` keeps it serial;
the plan is the one the server ran for the Reader's own query (auto_explain, in the server log).

The committed listing walks ``ix_proposal_created_at`` on both backends (EXPLAIN QUERY PLAN on
SQLite): behind ``coalesce(c.outcome, '')`` PostgreSQL expected few committed rows and ran a Seq Scan,
a hash join and a sort of every committed proposal before the LIMIT (p50 ~100 ms at 50,000 events).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import PostgresUrl
from tests.helpers import PROOF, add_reviewer, draft, record_commit
from tests.pg_support import PostgresServer, connect_now, database_name

PARALLEL_FOR_FREE = (
    "parallel_setup_cost = 0",
    "parallel_tuple_cost = 0",
    "min_parallel_table_scan_size = 0",
    "min_parallel_index_scan_size = 0",
    "session_preload_libraries = 'auto_explain'",
    "auto_explain.log_min_duration = 0",
    "auto_explain.log_format = 'json'",
)


@pytest.fixture
def backend() -> str:
    return "postgres"


def _node_types(node: dict[str, Any]) -> list[str]:
    """Each node's type, and the index or table it reads if any (``Index Scan ix_proposal_created_at``)."""
    on = node.get("Index Name") or node.get("Relation Name")
    here = f"{node['Node Type']} {on}" if on else node["Node Type"]
    return [here, *(t for child in node.get("Plans", []) for t in _node_types(child))]


def _listing_plans(log: str) -> list[list[str]]:
    """The node types of every logged plan of a proposal listing in ``log``."""
    plans, at = [], 0
    while (at := log.find("plan:", at)) >= 0:
        found, _ = json.JSONDecoder().raw_decode(log[log.index("{", at) :])
        if "ORDER BY p.created_at DESC" in found["Query Text"]:
            plans.append(_node_types(found["Plan"]))
        at += 1
    return plans


def test_pending_listing_never_waits_for_parallel_workers(
    home: Home, store: Store, postgres_server: PostgresServer
) -> None:
    assert isinstance(home.database, PostgresUrl)
    for i in range(40):
        store.propose(draft(f"notes/{i}.md", f"note {i}\n".encode()))
    name = database_name(home.database)
    with psycopg.connect(postgres_server.cluster.conninfo("postgres"), autocommit=True) as admin:
        for setting in PARALLEL_FOR_FREE:
            admin.execute(f"ALTER DATABASE {name} SET {setting}")
    log = postgres_server.cluster.base / "log"
    before = len(log.read_text(errors="replace"))
    with Reader(home.database) as reader:
        assert len(reader.proposals(status="pending", limit=50)) == 40
        assert len(reader.proposals(status="committed", limit=50)) == 0
    plans = _listing_plans(log.read_text(errors="replace")[before:])
    assert len(plans) == 2
    for nodes in plans:
        assert "Limit" in nodes
        assert not {"Gather", "Gather Merge"} & set(nodes), nodes


# -- the committed listing uses the created_at index on both backends -----------------------------

HISTORY = 3000  # proposals, most committed: PostgreSQL's statistics then favour the LIMIT walk
NUMBERS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "


def _clone(conn: Any, table: str, key: str, source: str, new_key: str, extra: dict[str, str]) -> None:
    """``HISTORY`` copies of ``table``'s row whose ``key`` is ``source``, the key and ``extra`` columns
    computed from ``i`` (the same SQL on both backends): a history of real rows, written fast."""
    cols = [d[0] for d in conn.execute(f"SELECT * FROM {table} WHERE {key} = ?", (source,)).description]
    cols = [c for c in cols if c != "id" or key == "id"]
    values = ", ".join({key: new_key, **extra}.get(c, c) for c in cols)
    sql = f"INSERT INTO {table} ({', '.join(cols)}) {NUMBERS}SELECT {values} FROM {table}, n WHERE {key} = ?"
    conn.execute(sql, (HISTORY, source))


def _committed_history(home: Home, store: Store) -> None:
    """One proposal approved and committed through the store, then ``HISTORY`` copies of its rows
    (nine in ten committed, the rest still approved), as a team's database looks after a while."""
    p = store.propose(draft("notes/committed.md", b"done\n"))
    store.decide(p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path="notes/committed.md", proof=PROOF)
    record_commit(store, p.id, "created", observed_sha256=p.sha256, final_path="/nowhere/committed.md")
    conn = connect_now(home.database)
    try:
        pid = "'h' || (100000 + i)"
        stamp = "'2026-06-01T00:00:00.' || (100000 + i) || 'Z'"
        _clone(conn, "proposal", "id", p.id, pid, {"created_at": stamp})
        _clone(conn, "decision", "proposal_id", p.id, pid, {})
        cols = "proposal_id, outcome, observed_sha256, final_path, detail, at"
        conn.execute(
            f"INSERT INTO commit_record ({cols}) {NUMBERS}SELECT {pid}, outcome, observed_sha256, final_path, "
            "detail, at FROM commit_record, n WHERE proposal_id = ? AND i % 10 <> 0",
            (HISTORY, p.id),
        )
        if isinstance(home.database, PostgresUrl):
            conn.execute("ANALYZE")  # what autovacuum does after such a history
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_committed_listing_walks_created_at_on_sqlite(home: Home, store: Store) -> None:
    add_reviewer(store)
    _committed_history(home, store)
    with Reader(home.database) as reader:
        rows = reader.proposals(status="committed", limit=50)
        plan = reader.query_plan(lambda: reader.proposals(status="committed", limit=50))
    assert len(rows) == 50 and {r.status for r in rows} == {"committed"}
    assert plan[0] == "SCAN p USING INDEX ix_proposal_created_at", plan


def test_committed_listing_walks_created_at_on_postgres(
    home: Home, store: Store, postgres_server: PostgresServer
) -> None:
    assert isinstance(home.database, PostgresUrl)
    add_reviewer(store)
    _committed_history(home, store)
    name = database_name(home.database)
    with psycopg.connect(postgres_server.cluster.conninfo("postgres"), autocommit=True) as admin:
        for setting in PARALLEL_FOR_FREE[-3:]:  # auto_explain only: the plan the server ran
            admin.execute(f"ALTER DATABASE {name} SET {setting}")
    log = postgres_server.cluster.base / "log"
    before = len(log.read_text(errors="replace"))
    with Reader(home.database) as reader:
        rows = reader.proposals(status="committed", limit=50)
    assert len(rows) == 50 and {r.status for r in rows} == {"committed"}
    (nodes,) = _listing_plans(log.read_text(errors="replace")[before:])
    assert "Index Scan ix_proposal_created_at" in nodes, nodes  # newest first, stopping at the LIMIT
    assert not [n for n in nodes if n.startswith("Seq Scan") or n == "Sort"], nodes  # not every match sorted
