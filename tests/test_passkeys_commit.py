"""The committer and ``audit verify --approvals`` re-verify passkey approvals (issue 14): approved
with a passkey, each committed; an assertion altered in the database (its HMAC recomputed with the
key, so only the assertion check can catch it) is refused with nothing written, and reported; under
``approve_with: passkey`` an approval without an assertion is refused; old decisions still commit."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.canonical import canonical_bytes, sha256_hex
from gatekeeper.store.decisions import Shown
from gatekeeper.trust.approval import Assertion
from gatekeeper.trust.signing import DecisionFacts
from tests.commit_support import World, make_world, run_commit
from tests.helpers import PROOF, predate_keys, signed_decision
from tests.passkey_support import RULES, enrol, sign
from tests.webauthn_authenticator import SoftAuthenticator


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "w")


@pytest.fixture
def alice(world: World) -> SoftAuthenticator:
    with world.store() as s:
        return enrol(s)


def passkey_approved(world: World, auth: SoftAuthenticator, paths: list[str]) -> list[str]:
    """Proposals for ``paths`` approved together with one assertion."""
    pids = [world.propose(path, f"{path}\n".encode(), verdict=None) for path in paths]
    with world.store() as s:
        proof = sign(auth, s.issue_challenge("alice", pids))
        shown = [Shown(pid, *world.db_rows("SELECT sha256, path FROM proposal WHERE id = ?", pid)[0]) for pid in pids]
        s.approve_batch(shown, reviewer="alice", proof=proof, rules=RULES)
    return pids


GK = [sys.executable, "-m", "gatekeeper"]


def audit_approvals(world: World) -> tuple[int, dict[str, object]]:
    run = subprocess.run(
        [
            *GK,
            "--home",
            str(world.home.path),
            "audit",
            "verify",
            "--approvals",
            "--policy",
            str(world.policy),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return run.returncode, json.loads(run.stdout)


def test_a_batch_approved_with_one_assertion_is_committed(world: World, alice: SoftAuthenticator) -> None:
    pids = passkey_approved(world, alice, [f"notes/{i}.md" for i in range(5)])
    run = run_commit(world)
    assert run.code == 0, run.err
    assert [world.outcome(pid)[0] for pid in pids] == ["created"] * 5  # type: ignore[index]
    assert (world.workspace / "notes" / "3.md").read_bytes() == b"notes/3.md\n"
    code, report = audit_approvals(world)
    assert (code, report["approvals_checked"], report["approval_problems"]) == (0, 5, [])


def _alter_assertion(world: World, pid: str, assertion: Assertion) -> None:
    """What someone with the database and the review side's private key could do: swap the stored
    assertion and sign the decision again, so the signature verifies and only the assertion check
    is left to notice."""
    text = assertion.to_json()
    facts, _, _ = signed_decision(world.home, pid)
    signer = world.home.keys.signer()
    signature = signer.sign(
        dataclasses.replace(facts, assertion_sha256=sha256_hex(text.encode())).message(signer.key_id)
    )
    with sqlite3.connect(world.home.db_path) as conn:
        conn.execute("DROP TRIGGER decision_no_update")
        conn.execute("UPDATE decision SET assertion = ?, signature = ? WHERE proposal_id = ?", (text, signature, pid))
        conn.execute(
            "CREATE TRIGGER decision_no_update BEFORE UPDATE ON decision "
            "BEGIN SELECT RAISE(ABORT, 'decision is append-only: UPDATE refused'); END"
        )
    conn.close()


def test_an_altered_assertion_is_refused_and_reported(world: World, alice: SoftAuthenticator) -> None:
    good, bad = passkey_approved(world, alice, ["notes/good.md", "notes/bad.md"])
    ((stored,),) = world.db_rows("SELECT assertion FROM decision WHERE proposal_id = ?", bad)
    # The same authenticator's valid assertion, over another challenge.
    other = Assertion.from_credential(alice.assert_(b"\x01" * 32))
    assert other.credential_id == Assertion.from_json(stored).credential_id
    _alter_assertion(world, bad, other)
    run = run_commit(world)
    assert run.code == 0, run.err
    assert world.outcome(good)[0] == "created"  # type: ignore[index]
    kind, detail, _ = world.outcome(bad)  # type: ignore[misc]
    assert kind == "refused" and "passkey assertion does not verify" in detail and "another challenge" in detail
    assert not (world.workspace / "notes" / "bad.md").exists()
    code, report = audit_approvals(world)
    assert code == 1
    problems = report["approval_problems"]
    assert [p["proposal_id"] for p in problems] == [bad]  # type: ignore[union-attr,index]


def _passkey_only(world: World) -> None:
    world.policy.write_text(world.policy.read_text().replace("version: 1\n", "version: 1\napprove_with: passkey\n", 1))


def test_approve_with_passkey_refuses_a_password_approval(world: World, alice: SoftAuthenticator) -> None:
    """Made under 'any' with the password, committed after the policy says passkey only: refused."""
    with world.store() as s:
        s.add_reviewer("bob", world.db_rows("SELECT password_hash FROM reviewer WHERE name = 'alice'")[0][0])
    pid = world.propose("notes/pw.md", b"pw\n", verdict=None)
    ((sha,),) = world.db_rows("SELECT sha256 FROM proposal WHERE id = ?", pid)
    with world.store() as s:
        s.decide(pid, verdict="approved", reviewer="bob", sha256=sha, path="notes/pw.md", proof=PROOF)
    signed = passkey_approved(world, alice, ["notes/pk.md"])
    _passkey_only(world)
    assert run_commit(world).code == 0
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    assert kind == "refused" and "approve_with: passkey" in detail and "with the password" in detail
    assert world.outcome(signed[0])[0] == "created"  # type: ignore[index]
    assert not (world.workspace / "notes" / "pw.md").exists()


def test_a_passkey_method_without_its_assertion_is_refused(world: World) -> None:
    """A row that says 'passkey' but carries no assertion (signed with the key): refused."""
    pid = world.propose("notes/x.md", b"x\n", verdict=None)
    ((sha, real, server, tool, ws),) = world.db_rows(
        "SELECT sha256, workspace_real, server, tool, workspace FROM proposal WHERE id = ?", pid
    )
    at = "2026-12-01T00:00:00.000000Z"
    facts = DecisionFacts(pid, server, tool, ws, real, "notes/x.md", "create", None, sha, "approved", "alice", None, at)
    signer = world.home.keys.signer()
    signature = signer.sign(dataclasses.replace(facts, method="passkey").message(signer.key_id))
    with sqlite3.connect(world.home.db_path) as conn:
        conn.execute(
            "INSERT INTO decision (proposal_id, verdict, reviewer, sha256, path, decided_at, signature, mode, method, "
            "key_id) VALUES (?, 'approved', 'alice', ?, 'notes/x.md', ?, ?, 'create', 'passkey', ?)",
            (pid, sha, at, signature, signer.key_id),
        )
    assert run_commit(world).code == 0
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    assert kind == "refused" and "carries no assertion" in detail


@pytest.mark.parametrize("approve_with", ["any", "passkey"])
def test_a_decision_signed_as_in_0006_still_commits_under_any(world: World, approve_with: str) -> None:
    """A row written as Gatekeeper wrote it before 0007 (mode and base signed, no method): its HMAC
    still verifies; it commits under 'any' and is refused under 'passkey' (it has no assertion)."""
    pid = world.propose("notes/old.md", b"old\n", verdict=None)
    ((sha, real),) = world.db_rows("SELECT sha256, workspace_real FROM proposal WHERE id = ?", pid)
    at = "2026-11-20T00:00:00.000000Z"
    old = {  # the message exactly as Gatekeeper signed it between migrations 0006 and 0007
        "purpose": "gatekeeper.decision.v1",
        "proposal_id": pid,
        "verdict": "approved",
        "reviewer": "alice",
        "reason": None,
        "sha256": sha,
        "path": "notes/old.md",
        "decided_at": at,
        "workspace_real": real,
        "mode": "create",
        "base_sha256": None,
    }
    signature = hmac.new(world.key, canonical_bytes(old), hashlib.sha256).hexdigest()
    predate_keys(world.home)
    with sqlite3.connect(world.home.db_path) as conn:
        conn.execute(
            "INSERT INTO decision (proposal_id, verdict, reviewer, sha256, path, decided_at, signature, mode) "
            "VALUES (?, 'approved', 'alice', ?, 'notes/old.md', ?, ?, 'create')",
            (pid, sha, at, signature),
        )
    if approve_with == "passkey":
        _passkey_only(world)
    assert run_commit(world).code == 0
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    if approve_with == "any":
        assert kind == "created", detail
    else:
        assert kind == "refused" and "before passkeys" in detail


def test_removing_a_passkey_later_keeps_its_earlier_approvals(world: World, alice: SoftAuthenticator) -> None:
    """Removal stops new approvals with the passkey, not the ones it already signed."""
    (pid,) = passkey_approved(world, alice, ["notes/before.md"])
    with world.store() as s:
        s.remove_passkey("alice", alice.credential_b64)
    assert run_commit(world).code == 0
    assert world.outcome(pid)[0] == "created"  # type: ignore[index]
