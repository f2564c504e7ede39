"""Reviewers for what they know (issue 15): a rule's ``approvals: 2`` and reviewers' scopes, at
decide time (the store, as the review page calls it) and at commit time (a real committer process,
reading the policy as it is then).

The requester's own account: a proposal records only its MCP client's name (``client_name``,
"pytest" in ``draft``); a reviewer of that name never counts."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from gatekeeper.commit.revert import REVERT_TOOL
from gatekeeper.errors import Conflict, PolicyError
from gatekeeper.home import Home
from gatekeeper.policy import load_policy
from gatekeeper.store.proofs import ApprovalRules
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from tests.commit_support import World, make_world, run_commit
from tests.helpers import PROOF, TEST_PASSWORD, add_reviewer, draft
from tests.pg_support import BACKENDS
from tests.review_support import Page, review_process

SCOPES = 'reviewers:\n  carol: {servers: [notes], globs: ["deep/**"]}\n'


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = make_world(tmp_path / "w")
    needs_two(w)
    with w.store() as s:
        for name in ("bob", "carol", "pytest"):
            add_reviewer(s, name)
    return w


def needs_two(world: World, scopes: str = SCOPES) -> None:
    """create_note needs two approvals; carol may decide only deep/**."""
    text = world.policy.read_text()
    text = text.replace(
        "          max_bytes: 1048576\n      replace_note",
        "          max_bytes: 1048576\n          approvals: 2\n      replace_note",
    )
    assert "approvals: 2" in text
    world.policy.write_text(text + scopes)


def rules(world: World) -> ApprovalRules:
    return ApprovalRules(policy=load_policy(str(world.policy)))


def decide(world: World, pid: str, reviewer: str, verdict: str = "approved", *, with_policy: bool = True) -> None:
    ((sha, path),) = world.db_rows("SELECT sha256, path FROM proposal WHERE id = ?", pid)
    with world.store() as s:
        s.decide(
            pid, verdict=verdict, reviewer=reviewer, sha256=sha, path=path, mode="create", proof=PROOF,
            reason="no" if verdict == "rejected" else None,
            rules=rules(world) if with_policy else ApprovalRules(),
        )  # fmt: skip


def kinds(world: World, pid: str) -> list[str]:
    return [r[0] for r in world.db_rows("SELECT kind FROM audit_event WHERE proposal_id = ? ORDER BY seq", pid)]


def refusal_why(world: World, pid: str) -> str:
    rows = world.db_rows(
        "SELECT payload FROM audit_event WHERE proposal_id = ? AND kind = 'decision_refused' ORDER BY seq DESC", pid
    )
    return str(rows[0][0])


def test_one_approval_of_two_is_recorded_signed_and_does_nothing(world: World) -> None:
    pid = world.propose("notes/one.md", b"one\n", verdict=None)
    decide(world, pid, "alice")
    assert world.db_rows("SELECT reviewer, method, key_id IS NOT NULL FROM approval WHERE proposal_id = ?", pid) == [
        ("alice", "password", 1)
    ]
    assert world.db_rows("SELECT 1 FROM decision WHERE proposal_id = ?", pid) == []
    assert "approval_recorded" in kinds(world, pid) and "decision" not in kinds(world, pid)
    run = run_commit(world)
    assert run.code == 0, run.err
    assert world.outcome(pid) is None and not (world.workspace / "notes" / "one.md").exists()


def test_the_same_reviewer_twice_counts_once(world: World) -> None:
    pid = world.propose("notes/twice.md", b"twice\n", verdict=None)
    decide(world, pid, "alice")
    with pytest.raises(Conflict, match="already approved"):
        decide(world, pid, "alice")
    assert "already approved by this reviewer" in refusal_why(world, pid)
    assert world.db_rows("SELECT count(*) FROM approval WHERE proposal_id = ?", pid) == [(1,)]
    assert world.db_rows("SELECT 1 FROM decision WHERE proposal_id = ?", pid) == []
    run_commit(world)
    assert world.outcome(pid) is None and not (world.workspace / "notes" / "twice.md").exists()


def test_two_distinct_reviewers_commit(world: World) -> None:
    pid = world.propose("notes/two.md", b"two\n", verdict=None)
    decide(world, pid, "alice")
    decide(world, pid, "bob")
    assert world.db_rows("SELECT reviewer, verdict FROM decision WHERE proposal_id = ?", pid) == [("bob", "approved")]
    run = run_commit(world)
    assert run.code == 0, run.err
    assert world.outcome(pid)[0] == "created"  # type: ignore[index]
    assert (world.workspace / "notes" / "two.md").read_bytes() == b"two\n"


def test_a_rejection_by_any_reviewer_rejects(world: World) -> None:
    pid = world.propose("notes/no.md", b"no\n", verdict=None)
    decide(world, pid, "alice")
    decide(world, pid, "bob", "rejected")
    assert world.db_rows("SELECT reviewer, verdict FROM decision WHERE proposal_id = ?", pid) == [("bob", "rejected")]


def test_the_requesters_own_account_never_approves(world: World) -> None:
    pid = world.propose("notes/own.md", b"own\n", verdict=None)
    with pytest.raises(Conflict, match="requester's own account"):
        decide(world, pid, "pytest")
    assert world.db_rows("SELECT count(*) FROM approval WHERE proposal_id = ?", pid) == [(0,)]


def test_a_reviewer_outside_their_scope_decides_nothing(world: World) -> None:
    pid = world.propose("notes/scoped.md", b"scoped\n", verdict=None)
    for verdict in ("approved", "rejected"):
        with pytest.raises(Conflict, match="may decide only notes at deep/"):
            decide(world, pid, "carol", verdict)
        assert "outside the reviewer's scope" in refusal_why(world, pid)
    assert world.db_rows("SELECT count(*) FROM approval WHERE proposal_id = ?", pid) == [(0,)]
    assert world.db_rows("SELECT count(*) FROM decision WHERE proposal_id = ?", pid) == [(0,)]
    deep = world.propose("deep/ok.md", b"ok\n", verdict=None)
    decide(world, deep, "carol")  # within scope
    assert world.db_rows("SELECT reviewer FROM approval WHERE proposal_id = ?", deep) == [("carol",)]


def test_the_committer_refuses_one_decision_where_two_approvals_are_needed(world: World) -> None:
    """A decision made without the policy's approvals (a review page that read no policy, or a
    database writer): the committer counts again and writes nothing."""
    pid = world.propose("notes/alone.md", b"alone\n", verdict=None)
    decide(world, pid, "alice", with_policy=False)
    run = run_commit(world)
    assert run.code == 0, run.err
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    assert kind == "refused" and "needs 2 distinct reviewers' approvals, and this has 1 (alice)" in detail
    assert not (world.workspace / "notes" / "alone.md").exists()


def test_the_committer_counts_a_copied_approval_once(world: World) -> None:
    """A database writer copies alice's signed decision into the approval table: still one reviewer."""
    pid = world.propose("notes/copy.md", b"copy\n", verdict=None)
    decide(world, pid, "alice", with_policy=False)
    with sqlite3.connect(world.home.db_path) as conn:
        conn.execute(
            "INSERT INTO approval (proposal_id, reviewer, reason, sha256, path, mode, base_sha256, decided_at, "
            "signature, key_id, method) SELECT proposal_id, reviewer, reason, sha256, path, mode, base_sha256, "
            "decided_at, signature, key_id, method FROM decision WHERE proposal_id = ?",
            (pid,),
        )
    run_commit(world)
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    assert kind == "refused" and "this has 1 (alice)" in detail
    assert not (world.workspace / "notes" / "copy.md").exists()


def test_the_committer_refuses_a_forged_approval_row(world: World) -> None:
    """An approval row nobody signed (a database writer's second reviewer) is refused, not counted."""
    pid = world.propose("notes/forged.md", b"forged\n", verdict=None)
    decide(world, pid, "alice", with_policy=False)
    with sqlite3.connect(world.home.db_path) as conn:
        conn.execute(
            "INSERT INTO approval (proposal_id, reviewer, reason, sha256, path, mode, base_sha256, decided_at, "
            "signature, key_id, method) SELECT proposal_id, 'bob', reason, sha256, path, mode, base_sha256, "
            "decided_at, signature, key_id, method FROM decision WHERE proposal_id = ?",
            (pid,),
        )
    run_commit(world)
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    assert kind == "refused" and "the approval by 'bob' does not hold" in detail
    assert not (world.workspace / "notes" / "forged.md").exists()


def test_the_committer_rechecks_scopes_from_the_current_policy(world: World) -> None:
    """Two approvals in scope when made; the policy then narrows bob: the committer refuses."""
    pid = world.propose("notes/narrowed.md", b"narrowed\n", verdict=None)
    decide(world, pid, "alice")
    decide(world, pid, "bob")
    world.policy.write_text(world.policy.read_text() + '  bob: {globs: ["deep/**"]}\n')
    run_commit(world)
    kind, detail, _ = world.outcome(pid)  # type: ignore[misc]
    assert kind == "refused" and "reviewer 'bob' may decide only any server at deep/**" in detail
    assert not (world.workspace / "notes" / "narrowed.md").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("approvals: 2", "approvals: 0"), "1 to 5, not 0"),
        (("approvals: 2", "approvals: 6"), "1 to 5, not 6"),
        (("servers: [notes]", "servers: [nope]"), "reviewer 'carol' is given server 'nope', which the policy does not"),
    ],
)
def test_policy_errors_say_what_is_wrong(world: World, change: tuple[str, str], message: str) -> None:
    world.policy.write_text(world.policy.read_text().replace(*change))
    with pytest.raises(PolicyError, match=message):
        load_policy(str(world.policy))


def test_store_without_policy_decides_as_before(tmp_path: Path) -> None:
    """No policy given to the store (ApprovalRules()): one approval decides, as before scopes."""
    w = make_world(tmp_path / "plain")
    pid = w.propose("notes/plain.md", b"plain\n")
    assert w.db_rows("SELECT reviewer FROM decision WHERE proposal_id = ?", pid) == [("alice",)]


def test_the_page_shows_who_approved_and_a_second_reviewer_completes_it(world: World) -> None:
    """The real review server over HTTP, told the policy: alice approves, the page shows one of two
    by alice; carol (scoped to deep/**) is refused; bob approves second; the committer writes."""
    pid = world.propose("notes/page.md", b"page\n", verdict=None)
    ((sha,),) = world.db_rows("SELECT sha256 FROM proposal WHERE id = ?", pid)
    with review_process(world.home, "--policy", str(world.policy)) as (base, _proc):
        pages = {name: Page(base) for name in ("alice", "carol", "bob")}
        for name, page in pages.items():
            assert page.login(name, TEST_PASSWORD).status_code == 303
        alice, carol, bob = pages["alice"], pages["carol"], pages["bob"]
        assert "2 of 2" not in alice.client.get(f"/proposals/{pid}").text
        queued = f'id="approvals-{pid}" title="approvals so far, of those its rule needs">'
        assert f"{queued}0 of 2</span>" in alice.client.get("/").text
        done = alice.approve(pid, sha, "notes/page.md", alice.csrf(pid), password=TEST_PASSWORD)
        assert done.status_code == 303, done.text
        assert f"{queued}1 of 2</span>" in bob.client.get("/").text  # the queue says it too
        shown = bob.client.get(f"/proposals/{pid}").text
        assert re.search(r'id="approvals">Approvals: <strong>1 of 2</strong>, by alice; 1 more needed', shown), shown
        assert 'id="status">pending' in shown
        refused = carol.approve(pid, sha, "notes/page.md", carol.csrf(pid), password=TEST_PASSWORD)
        assert refused.status_code == 409 and "may decide only notes at deep/**" in refused.text
        done = bob.approve(pid, sha, "notes/page.md", bob.csrf(pid), password=TEST_PASSWORD)
        assert done.status_code == 303, done.text
        assert 'id="status">approved' in bob.client.get(f"/proposals/{pid}").text
    run_commit(world)
    assert (world.workspace / "notes" / "page.md").read_bytes() == b"page\n"


def test_a_revert_needs_as_many_approvals_as_the_rule_it_undoes(world: World) -> None:
    """No rule names the revert tool: it takes the most approvals of the rules that allow its path."""
    pid = world.propose("notes/undo.md", b"undo\n", verdict=None, tool=REVERT_TOOL)
    decide(world, pid, "alice")
    assert world.db_rows("SELECT reviewer FROM approval WHERE proposal_id = ?", pid) == [("alice",)]
    alone = world.propose("notes/undo2.md", b"undo\n", verdict=None, tool=REVERT_TOOL)
    decide(world, alone, "alice", with_policy=False)
    run_commit(world)
    kind, detail, _ = world.outcome(alone)  # type: ignore[misc]
    assert kind == "refused" and "needs 2 distinct" in detail


TWO = """version: 1
servers:
  notes:
    command: python
    workspace: .
    tools:
      create_note: {propose: {path: {arg: path}, content: {arg: content}, approvals: 2}}
reviewers:
  carol: {globs: ["deep/**"]}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_store_counts_approvals_on_both_backends(home: Home, store: Store, tmp_path: Path) -> None:
    (tmp_path / "two.yaml").write_text(TWO)
    two = ApprovalRules(policy=load_policy(str(tmp_path / "two.yaml")))
    for name in ("alice", "bob", "carol"):
        add_reviewer(store, name)
    p = store.propose(draft())

    def approve(reviewer: str) -> None:
        store.decide(
            p.id, verdict="approved", reviewer=reviewer, sha256=p.sha256, path="notes/a.md", proof=PROOF, rules=two
        )

    approve("alice")
    with pytest.raises(Conflict, match="already approved"):
        approve("alice")
    with pytest.raises(Conflict, match="may decide only any server at deep/"):
        approve("carol")
    with Reader(home.database) as r:
        assert [a["reviewer"] for a in r.approvals([p.id])[p.id]] == ["alice"]
        assert r.proposal(p.id)["status"] == "pending"  # type: ignore[index]
    approve("bob")
    with Reader(home.database) as r:
        assert r.proposal(p.id)["status"] == "approved"  # type: ignore[index]
        assert [(row["reviewer"], row["method"]) for row in r.commit_queue()[1]] == [("bob", "password")]
