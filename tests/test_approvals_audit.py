"""``audit verify --approvals`` checks the ``approval`` rows of a rule's ``approvals: N`` as it checks
decisions: each signature over its proposal as stored now, its digests and its proof. A database
writer without the key who edits such a row, or copies it to another proposal, is named; the
real command runs in a subprocess, as an auditor runs it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.commit_support import World, make_world
from tests.helpers import add_reviewer
from tests.test_approvals import decide, needs_two


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = make_world(tmp_path / "w")
    needs_two(w)
    with w.store() as s:
        add_reviewer(s, "bob")
    return w


def audit_approvals(world: World) -> tuple[int, dict[str, Any]]:
    args = ["--home", str(world.home.path), "audit", "verify", "--approvals", "--policy", str(world.policy)]
    run = subprocess.run(
        [sys.executable, "-m", "gatekeeper", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.stdout, run.stderr
    return run.returncode, json.loads(run.stdout)


def tamper(world: World, sql: str, *params: object) -> None:
    """As a writer with the database: the approval table's append-only triggers dropped first."""
    conn = sqlite3.connect(world.home.db_path)
    try:
        with conn:
            conn.execute("DROP TRIGGER IF EXISTS approval_no_update")
            conn.execute(sql, params)
    finally:
        conn.close()


def two_proposals(world: World) -> tuple[str, str]:
    """One approved by alice and bob (an approval row and the decision), one with alice's approval only."""
    done = world.propose("notes/done.md", b"done\n", verdict=None)
    decide(world, done, "alice")
    decide(world, done, "bob")
    half = world.propose("notes/half.md", b"half\n", verdict=None)
    decide(world, half, "alice")
    return done, half


def test_every_approval_row_and_decision_is_checked(world: World) -> None:
    two_proposals(world)
    code, report = audit_approvals(world)
    assert (code, report["approvals_checked"], report["approval_problems"]) == (0, 3, [])


def test_an_approval_row_moved_to_another_reviewer_is_named(world: World) -> None:
    """bob approved the first proposal; the writer makes alice's half-approval of the second bob's too."""
    _, half = two_proposals(world)
    tamper(world, "UPDATE approval SET reviewer = 'bob' WHERE proposal_id = ?", half)
    code, report = audit_approvals(world)
    assert code == 1 and report["ok"] is False
    (problem,) = report["approval_problems"]
    assert problem["proposal_id"] == half and problem["reviewer"] == "bob"
    assert problem["problem"].startswith("an approval row") and "signature does not verify" in problem["problem"]


def test_an_approval_row_copied_to_another_proposal_is_named(world: World) -> None:
    """Same path and bytes, so only the proposal id in the signed message tells them apart."""
    done, _ = two_proposals(world)
    again = world.propose("notes/done.md", b"done\n", verdict=None)  # the agent asked again
    tamper(
        world,
        "INSERT INTO approval (proposal_id, reviewer, reason, sha256, path, mode, base_sha256, decided_at, signature, "
        "key_id, method) SELECT ?, reviewer, reason, sha256, path, mode, base_sha256, decided_at, signature, key_id, "
        "method FROM approval WHERE proposal_id = ?",
        again,
        done,
    )
    code, report = audit_approvals(world)
    assert code == 1, report
    assert [p["proposal_id"] for p in report["approval_problems"]] == [again]
    assert "signature does not verify" in report["approval_problems"][0]["problem"]
