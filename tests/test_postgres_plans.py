"""PostgreSQL plans the proposal listing without parallel workers (migration 0010).

At 1,000,000 events the planner ran ``audit proposals --status pending`` as a Gather Merge, and
starting the workers cost 15-80 ms for ~1 ms of work (bench/team_bench.py T4). Here the planner
is told parallel plans cost nothing, so only the tables' ``parallel_workers = 0`` keeps it serial;
the plan is the one the server ran for the Reader's own query (auto_explain, in the server log).
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
from tests.helpers import draft
from tests.pg_support import PostgresServer, database_name

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
    return [node["Node Type"], *(t for child in node.get("Plans", []) for t in _node_types(child))]


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
