"""Issue 15's attacks on trust, each made by someone who can write the database (triggers dropped
where they are in the way) but holds no private key: each is refused or detected, nothing written.

The committer runs as a real process (``run_commit``), log-in goes through the review app over
HTTP, and ``audit verify`` is the real command."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from gatekeeper.canonical import canonical_json
from gatekeeper.cli import cli
from gatekeeper.errors import Conflict, GatekeeperError
from gatekeeper.home import Home
from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.store import Store
from gatekeeper.trust.passwords import hash_password
from tests.commit_support import World, make_world, run_commit, wait_for
from tests.helpers import PROOF, add_reviewer, draft
from tests.review_support import PASSWORD, Page, decisions, event_count, hashed, review_app

MALLORY = "mallory's own passphrase"


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "w")


@contextmanager
def unguarded(db: Path, *triggers: str) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 writer, as an attacker has it: the named guard triggers dropped first."""
    conn = sqlite3.connect(db)
    try:
        with conn:
            for name in triggers:
                conn.execute(f"DROP TRIGGER IF EXISTS {name}")
            yield conn
    finally:
        conn.close()


def other_server(world: World) -> Path:
    """A second server in the policy, with its own workspace and the same tool."""
    other = world.root / "other"
    other.mkdir()
    with world.policy.open("a") as f:
        f.write(
            f"  other:\n    command: python\n    workspace: {other}\n    tools:\n      create_note:\n"
            '        propose: {path: {arg: path}, content: {arg: body}, globs: ["notes/**"], max_bytes: 1048576}\n'
        )
    return other


def test_an_approved_proposal_moved_to_another_servers_workspace_is_refused(world: World) -> None:
    other = other_server(world)
    pid = world.propose("notes/moved.md", b"moved\n")
    with unguarded(world.home.db_path, "proposal_no_update") as conn:
        conn.execute(
            "UPDATE proposal SET server = 'other', workspace = ?, workspace_real = ? WHERE id = ?",
            (str(other), os.path.realpath(other), pid),
        )
    run = run_commit(world)
    assert run.code == 0, run.err
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    assert kind == "refused" and "signature does not verify" in detail and "server, tool, workspace" in detail
    assert not (other / "notes" / "moved.md").exists() and not (world.workspace / "notes" / "moved.md").exists()


def test_a_decision_copied_to_another_proposal_is_refused(world: World) -> None:
    """The copy is word for word but its proposal id, onto a proposal of the same tool, path and bytes:
    only the proposal id in the signed message tells them apart."""
    approved = world.propose("notes/a.md", b"same\n")
    target = world.propose("notes/a.md", b"same\n", verdict=None)  # the agent asked again
    with unguarded(world.home.db_path) as conn:
        conn.execute(
            "INSERT INTO decision (proposal_id, verdict, reviewer, reason, sha256, path, decided_at, signature, mode, "
            "base_sha256, method, key_id) SELECT ?, verdict, reviewer, reason, sha256, path, decided_at, signature, "
            "mode, base_sha256, method, key_id FROM decision WHERE proposal_id = ?",
            (target, approved),
        )
    assert run_commit(world).code == 0
    assert world.outcome(approved)[0] == "created"  # type: ignore[index]
    kind, detail, _ = world.outcome(target)  # type: ignore[misc]
    assert kind == "refused" and "signature does not verify" in detail


def test_a_deleted_commit_record_does_not_create_the_file_again(world: World) -> None:
    """Seen by a committer whose journal does not have it (a new machine): the chain's outcome event holds."""
    pid = world.propose("notes/once.md", b"once\n")
    assert run_commit(world).code == 0 and world.outcome(pid)[0] == "created"  # type: ignore[index]
    (world.workspace / "notes" / "once.md").unlink()  # the person removed the file since
    (world.home.path / "commit-journal").unlink()
    with unguarded(world.home.db_path, "commit_record_no_delete") as conn:
        conn.execute("DELETE FROM commit_record WHERE proposal_id = ?", (pid,))
    run = run_commit(world)
    assert run.code == 1, run.err  # it had to wait: `commit --help` says 1
    assert "the audit chain has its commit_outcome event" in run.err, run.err
    assert event_count(world.home, "commit_replay_refused") == 1
    assert not (world.workspace / "notes" / "once.md").exists()
    assert world.outcome(pid) is None  # nothing written: no second outcome row ...
    outcomes = world.db_rows("SELECT count(*) FROM audit_event WHERE kind = 'commit_outcome' AND proposal_id = ?", pid)
    assert outcomes == [(1,)]  # ... and no second outcome event


def test_a_replaced_password_hash_neither_logs_in_nor_approves(home: Home) -> None:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        p = store.propose(draft())
    with unguarded(home.db_path, "reviewer_resigned") as conn:
        conn.execute("UPDATE reviewer SET password_hash = ? WHERE name = 'alice'", (hash_password(MALLORY),))
    logins = event_count(home, "login")
    with review_app(home) as site:
        assert Page(site).login("alice", MALLORY).status_code != 303
        assert Page(site).login("alice", PASSWORD).status_code != 303  # the row is not alice's any more either
    assert event_count(home, "login") == logins
    assert event_count(home, "reviewer_row_refused") == 2  # each attempt says why, in the log
    with Store(home.db_path) as store, pytest.raises(Conflict, match="not signed by the review key"):
        store.decide(
            p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path=p_path(), proof=PasswordProof(MALLORY)
        )
    assert decisions(home) == []


def test_an_inserted_reviewer_row_neither_logs_in_nor_approves(home: Home) -> None:
    """Even with another row's signature copied in, the row is not signed for its own values."""
    with Store(home.db_path) as store:
        add_reviewer(store)
        p = store.propose(draft())
    with unguarded(home.db_path) as conn:
        conn.execute(
            "INSERT INTO reviewer (name, password_hash, created_at, key_id, signature) SELECT 'mallory', ?, "
            "created_at, key_id, signature FROM reviewer WHERE name = 'alice'",
            (hash_password(MALLORY),),
        )
    with review_app(home) as site:
        assert Page(site).login("mallory", MALLORY).status_code != 303
        wait_for(lambda: event_count(home, "chain_checkpoint") == 1)  # the page signs the head at start
    assert event_count(home, "chain_checkpoint") == 1
    with Store(home.db_path) as store, pytest.raises(Conflict, match="not signed by the review key"):
        store.decide(
            p.id, verdict="approved", reviewer="mallory", sha256=p.sha256, path=p_path(), proof=PasswordProof(MALLORY)
        )
    assert decisions(home) == []
    assert event_count(home, "decision_refused") == 1


def p_path() -> str:
    return str(draft().path)


def rewrite_without(db: Path, seq: int) -> None:
    """Delete the event at ``seq`` and renumber and rehash every later one, as a writer without the
    key can: the chain verifies again on its own."""
    with unguarded(db, "audit_event_no_update", "audit_event_no_delete") as conn:
        rows = conn.execute(
            "SELECT seq, at, kind, actor, proposal_id, payload FROM audit_event ORDER BY seq"
        ).fetchall()
        conn.execute("DELETE FROM audit_event")
        prev = GENESIS
        for new_seq, (_, at, kind, actor, pid, payload) in enumerate((r for r in rows if r[0] != seq), start=1):
            digest = event_hash(prev, new_seq, at, kind, actor, pid, payload)
            conn.execute(
                "INSERT INTO audit_event (seq, at, kind, actor, proposal_id, payload, prev_hash, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (new_seq, at, kind, actor, pid, payload, prev, digest),
            )
            prev = digest


def test_a_deleted_outcome_event_with_every_later_hash_recomputed_is_caught_by_a_checkpoint(world: World) -> None:
    pid = world.propose("notes/a.md", b"a\n")
    assert run_commit(world).code == 0
    home = ["--home", str(world.home.path)]
    signed = CliRunner().invoke(cli, [*home, "audit", "checkpoint"])
    assert signed.exit_code == 0 and "Signed checkpoint" in signed.output, signed.output
    world.propose("notes/b.md", b"b\n", verdict=None)  # history goes on after the checkpoint
    assert CliRunner().invoke(cli, [*home, "audit", "verify"]).exit_code == 0
    ((seq,),) = world.db_rows("SELECT seq FROM audit_event WHERE kind = 'commit_outcome' AND proposal_id = ?", pid)
    rewrite_without(world.home.db_path, seq)
    result = CliRunner().invoke(cli, [*home, "audit", "verify"])
    assert result.exit_code == 1, result.output
    assert "OK: " in result.output.splitlines()[0]  # the recomputed chain itself verifies ...
    assert "CHECKPOINT at seq" in result.output and "history before it was rewritten" in result.output  # ... not this


def test_a_forged_checkpoint_is_refused(world: World) -> None:
    """A checkpoint event written by the attacker (the right shape, no key) does not verify."""
    home = ["--home", str(world.home.path)]
    assert CliRunner().invoke(cli, [*home, "audit", "checkpoint"]).exit_code == 0
    ((seq, payload),) = world.db_rows("SELECT seq, payload FROM audit_event WHERE kind = 'chain_checkpoint'")
    fields = json.loads(payload)
    fields["signature"] = fields["signature"][::-1]  # hex still, but not the key's signature
    forged = canonical_json(fields)
    with unguarded(world.home.db_path, "audit_event_no_update") as conn:
        conn.execute("UPDATE audit_event SET payload = ? WHERE seq = ?", (forged, seq))
    rewrite_without(world.home.db_path, 0)  # rehash from the start: the chain verifies again
    result = CliRunner().invoke(cli, [*home, "audit", "verify"])
    assert result.exit_code == 1 and "signature does not verify" in result.output, result.output


def test_a_committer_with_public_keys_only_verifies_but_cannot_approve(world: World, tmp_path: Path) -> None:
    pid = world.propose("notes/p.md", b"p\n", verdict=None)
    exported = CliRunner().invoke(cli, ["--home", str(world.home.path), "keys", "export-public"])
    assert exported.exit_code == 0, exported.output
    elsewhere = tmp_path / "committer-keys"
    imported = CliRunner().invoke(cli, ["--home", str(elsewhere), "keys", "import-public", "-"], input=exported.output)
    assert imported.exit_code == 0 and "Imported 1 new public key" in imported.output, imported.output
    assert not (elsewhere / "keys" / "decision-ed25519").exists()
    ((sha,),) = world.db_rows("SELECT sha256 FROM proposal WHERE id = ?", pid)
    with (
        Store(world.home.db_path, keys_dir=elsewhere / "keys") as store,
        pytest.raises(GatekeeperError, match="holds public keys only, so it cannot approve"),
    ):
        store.decide(pid, verdict="approved", reviewer="alice", sha256=sha, path="notes/p.md", proof=PROOF)
    assert world.db_rows("SELECT count(*) FROM decision WHERE proposal_id = ?", pid) == [(0,)]
