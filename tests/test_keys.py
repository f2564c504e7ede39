"""``gatekeeper keys``: rotation keeps old signatures verifying; a committer's machine with public keys
only (no private key, no secret.key) commits what the review side approved; an HMAC decision made
after the first Ed25519 key is refused even when its HMAC is right (secret.key alone cannot approve)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from gatekeeper.canonical import canonical_bytes
from gatekeeper.cli import cli
from gatekeeper.home import Home
from tests.commit_support import World, make_world, run_commit


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "w")


def gk(home: Path, *args: str, input: str | None = None) -> str:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], input=input)
    assert result.exit_code == 0, result.output
    return result.output


def test_rotate_signs_new_decisions_with_the_new_key_and_old_ones_still_commit(world: World) -> None:
    before = world.home.keys.signer().key_id
    old = world.propose("notes/old.md", b"old\n")
    assert "New signing key" in gk(world.home.path, "keys", "rotate")
    new = world.propose("notes/new.md", b"new\n")
    after = world.home.keys.signer().key_id
    assert after != before
    assert world.db_rows("SELECT key_id FROM decision ORDER BY id") == [(before,), (after,)]
    listed = json.loads(gk(world.home.path, "keys", "list", "--json"))
    assert sorted(listed["keys"]) == sorted([before, after]) and listed["signing"] == after
    assert world.db_rows("SELECT payload FROM audit_event WHERE kind = 'key_rotated'") == [
        (json.dumps({"key_id": after, "old_key_id": before}, separators=(",", ":")),)
    ]
    assert run_commit(world).code == 0
    assert world.outcome(old)[0] == world.outcome(new)[0] == "created"  # type: ignore[index]


def test_a_machine_with_public_keys_only_commits_what_the_review_side_signed(world: World, tmp_path: Path) -> None:
    world.propose("notes/far.md", b"far\n")
    far = Home(tmp_path / "committer")
    gk(far.path, "keys", "import-public", "-", input=gk(world.home.path, "keys", "export-public"))
    src, dst = sqlite3.connect(world.home.db_path), sqlite3.connect(far.path / "gatekeeper.db")
    src.backup(dst)  # the shared database, as a committer elsewhere reaches it
    src.close()
    dst.close()
    assert not far.key_path.exists() and not far.keys.has_private()
    run = run_commit(dataclasses.replace(world, home=far))
    assert run.code == 0, run.err
    ((outcome,),) = sqlite3.connect(far.db_path).execute("SELECT outcome FROM commit_record").fetchall()
    assert outcome == "created" and (world.workspace / "notes" / "far.md").read_bytes() == b"far\n"


def test_an_hmac_decision_made_after_the_first_key_is_refused(world: World) -> None:
    """The HMAC is right (made with secret.key, as any old committer's machine could), but
    decisions since Ed25519 keys always carry an Ed25519 signature."""
    pid = world.propose("notes/h.md", b"h\n", verdict=None)
    ((sha, real),) = world.db_rows("SELECT sha256, workspace_real FROM proposal WHERE id = ?", pid)
    at = "2026-12-01T00:00:00.000000Z"
    message = {"purpose": "gatekeeper.decision.v1", "proposal_id": pid, "verdict": "approved", "reviewer": "alice"}
    message |= {"reason": None, "sha256": sha, "path": "notes/h.md", "decided_at": at, "workspace_real": real}
    message |= {"mode": "create", "base_sha256": None}
    signature = hmac.new(world.key, canonical_bytes(message), hashlib.sha256).hexdigest()
    with sqlite3.connect(world.home.db_path) as conn:
        conn.execute(
            "INSERT INTO decision (proposal_id, verdict, reviewer, sha256, path, decided_at, signature, mode) "
            "VALUES (?, 'approved', 'alice', ?, 'notes/h.md', ?, ?, 'create')",
            (pid, sha, at, signature),
        )
    assert run_commit(world).code == 0
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    assert kind == "refused" and "carries no Ed25519 signature" in detail
    assert not (world.workspace / "notes" / "h.md").exists()
