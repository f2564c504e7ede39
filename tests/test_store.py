"""The domain API: each change with its event, each refusal recorded, status derived."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import replace
from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.home import Home
from gatekeeper.store import events as ev
from gatekeeper.store.chain import EventRow
from gatekeeper.store.follow import Changes, Follower
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.trust import signing
from tests.helpers import PROOF, add_reviewer, draft, wait_until
from tests.pg_support import BACKENDS, raw


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every test here runs on SQLite and on PostgreSQL."""
    return str(request.param)


def kinds(home: Home) -> list[str]:
    with Reader(home.database) as r:
        return [e[2] for e in r.events()]


def status(home: Home, pid: str) -> str:
    with Reader(home.database) as r:
        detail = r.proposal(pid)
    assert detail is not None
    return detail["status"]


def test_propose_records_exact_bytes_and_its_event(home: Home, store: Store) -> None:
    content = "caf\u00e9 \u202e\n".encode() + b"\x00\xff"
    p = store.propose(draft(content=content, arguments={"x": 1.0, "n": 12345678901234567890, "z": None}))
    assert p.created
    with Reader(home.database) as r:
        detail = r.proposal(p.id)
    assert detail is not None
    assert detail["content"] == content
    assert detail["size"] == len(content)
    assert json.loads(detail["arguments"]) == {"x": 1.0, "n": 12345678901234567890, "z": None}
    assert detail["status"] == "pending"
    assert [e["kind"] for e in detail["events"]] == ["proposal_created"]
    assert json.loads(detail["events"][0]["payload"])["sha256"] == p.sha256


def test_identical_retry_returns_the_pending_proposal(home: Home, store: Store) -> None:
    a = store.propose(draft())
    b = store.propose(draft(session_id="another-session"))
    assert (b.id, b.created) == (a.id, False)
    c = store.propose(draft(content=b"different\n"))
    assert c.created and c.id != a.id
    assert kinds(home) == ["proposal_created", "proposal_repeated", "proposal_created"]


def test_retry_after_a_decision_makes_a_new_proposal(home: Home, store: Store) -> None:
    add_reviewer(store)
    a = store.propose(draft())
    store.decide(
        a.id,
        verdict="rejected",
        reviewer="alice",
        reason="no",
        sha256=a.sha256,
        path="notes/a.md",
        proof=PROOF,
    )
    b = store.propose(draft())
    assert b.created and b.id != a.id


def test_decision_is_signed_over_the_exact_proposal(home: Home, store: Store) -> None:
    """Ed25519 by the home's key over everything the committer acts on; the HMAC key cannot make it."""
    add_reviewer(store)
    p = store.propose(draft())
    store.decide(p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path="notes/a.md", proof=PROOF)
    row = (
        raw(home)
        .execute(
            "SELECT d.proposal_id, d.verdict, d.reviewer, d.reason, d.sha256, d.path, d.decided_at, d.signature, "
            "d.key_id, p.server, p.tool, p.workspace, p.workspace_real FROM decision d JOIN proposal p "
            "ON p.id = d.proposal_id"
        )
        .fetchone()
    )
    facts = signing.DecisionFacts(
        proposal_id=row[0],
        server=row[9],
        tool=row[10],
        workspace=row[11],
        workspace_real=row[12],
        path=row[5],
        mode="create",
        base_sha256=None,
        sha256=row[4],
        verdict=row[1],
        reviewer=row[2],
        reason=row[3],
        decided_at=row[6],
        method="password",
    )
    keyring = home.keys.keyring()
    assert row[8] == home.keys.signer().key_id
    assert keyring.verify(row[8], facts.message(row[8]), row[7])
    for moved in ({"proposal_id": "0" * 26}, {"server": "other"}, {"tool": "write"}, {"workspace": "/elsewhere"}):
        assert not keyring.verify(row[8], replace(facts, **moved).message(row[8]), row[7]), moved
    assert not signing.verify(home.read_key(), facts.message(row[8]), row[7])  # not an HMAC any more
    assert status(home, p.id) == "approved"


@pytest.mark.parametrize(
    "change, error, why",
    [
        ({"sha256": "0" * 64}, Conflict, "digest or path mismatch"),
        ({"path": "notes/b.md"}, Conflict, "digest or path mismatch"),
        ({"reviewer": "mallory"}, Conflict, "reviewer unknown or disabled"),
        ({"verdict": "maybe"}, InvalidInput, "bad verdict"),
        ({"verdict": "rejected", "reason": "  "}, InvalidInput, "no reason"),
    ],
)
def test_bad_decisions_are_refused_and_recorded(home: Home, store: Store, change: dict, error: type, why: str) -> None:
    add_reviewer(store)
    p = store.propose(draft())
    args = {"verdict": "approved", "reviewer": "alice", "sha256": p.sha256, "path": "notes/a.md"} | change
    with pytest.raises(error):
        store.decide(p.id, **args, proof=PROOF)
    assert status(home, p.id) == "pending"
    with Reader(home.database) as r:
        last = r.events()[-1]
    assert last[2] == "decision_refused" and json.loads(last[5])["why"] == why


def test_one_decision_per_proposal_and_no_replay_onto_another(home: Home, store: Store) -> None:
    add_reviewer(store)
    a = store.propose(draft("notes/a.md", b"A"))
    b = store.propose(draft("notes/b.md", b"B"))
    store.decide(a.id, verdict="approved", reviewer="alice", sha256=a.sha256, path="notes/a.md", proof=PROOF)
    with pytest.raises(Conflict, match="already decided"):
        store.decide(
            a.id,
            verdict="rejected",
            reviewer="alice",
            reason="x",
            sha256=a.sha256,
            path="notes/a.md",
            proof=PROOF,
        )
    with pytest.raises(Conflict, match="sha256"):  # a's approval (digest, path) replayed onto b
        store.decide(b.id, verdict="approved", reviewer="alice", sha256=a.sha256, path="notes/a.md", proof=PROOF)
    assert (status(home, a.id), status(home, b.id)) == ("approved", "pending")


def test_expired_proposal_cannot_be_approved_but_can_be_rejected(home: Home, store: Store) -> None:
    add_reviewer(store)
    p = store.propose(draft(expires_in=0.05))
    wait_until(lambda: status(home, p.id) == "expired", 5, "the proposal to expire (50 ms)")
    with pytest.raises(Conflict, match="expired"):
        store.decide(
            p.id,
            verdict="approved",
            reviewer="alice",
            sha256=p.sha256,
            path="notes/a.md",
            proof=PROOF,
        )
    store.decide(
        p.id,
        verdict="rejected",
        reviewer="alice",
        reason="stale",
        sha256=p.sha256,
        path="notes/a.md",
        proof=PROOF,
    )
    assert status(home, p.id) == "rejected"


def test_disabled_reviewer_cannot_decide(home: Home, store: Store) -> None:
    add_reviewer(store)
    store.disable_reviewer("alice")
    p = store.propose(draft())
    with pytest.raises(Conflict, match="disabled"):
        store.decide(
            p.id,
            verdict="approved",
            reviewer="alice",
            sha256=p.sha256,
            path="notes/a.md",
            proof=PROOF,
        )


def test_commit_intent_needs_an_approval_and_outcome_is_once(home: Home, store: Store) -> None:
    add_reviewer(store)
    p = store.propose(draft())
    unknown = "0" * 26
    assert store.record_commit_intents([p.id, unknown]) == {p.id: "not approved", unknown: "not approved"}
    store.decide(p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path="notes/a.md", proof=PROOF)
    assert store.record_commit_intents([p.id]) == {p.id: "new"}
    created = {"proposal_id": p.id, "outcome": "created", "observed_sha256": p.sha256, "final_path": "/w/notes/a.md"}
    assert store.record_commit_outcomes([created]) == {p.id: True}
    assert status(home, p.id) == "committed"
    assert store.record_commit_outcomes([{"proposal_id": p.id, "outcome": "conflict"}]) == {p.id: False}
    assert status(home, p.id) == "committed"
    assert store.record_commit_intents([p.id]) == {p.id: "done"}
    with pytest.raises(InvalidInput):
        store.record_commit_outcomes([{"proposal_id": p.id, "outcome": "exploded"}])
    assert kinds(home)[-2:] == ["commit_intent", "commit_outcome"]


@pytest.mark.parametrize("outcome", ["conflict", "refused", "failed"])
def test_outcome_statuses(home: Home, store: Store, outcome: str) -> None:
    add_reviewer(store)
    p = store.propose(draft())
    store.decide(p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path="notes/a.md", proof=PROOF)
    store.record_commit_outcomes([{"proposal_id": p.id, "outcome": outcome, "detail": "why"}])
    assert status(home, p.id) == outcome
    with Reader(home.database) as r:
        assert [row.id for row in r.proposals(status=outcome)] == [p.id]
        assert r.proposals(status="approved") == []


def test_floats_never_enter_a_hashed_payload(store: Store) -> None:
    with pytest.raises(ValueError, match="floats"):
        store.append_event("x", "test", {"f": 1.5})


def test_reviewer_changes_are_events(home: Home, store: Store) -> None:
    add_reviewer(store)
    with pytest.raises(Conflict):
        add_reviewer(store)
    store.set_reviewer_password("alice", "$argon2id$other")
    store.disable_reviewer("alice")
    with pytest.raises(Conflict, match="already disabled"):
        store.disable_reviewer("alice")
    with pytest.raises(NotFound):
        store.disable_reviewer("bob")
    assert kinds(home) == ["reviewer_added", "reviewer_password_changed", "reviewer_disabled"]
    r = store.reviewer("alice")
    assert r is not None and r.disabled_at is not None and r.password_hash == "$argon2id$other"


def test_tool_pins_first_sight_change_and_acceptance(home: Home, store: Store) -> None:
    v1 = {"read": ("d1", '{"name":"read"}'), "write": ("w1", '{"name":"write"}')}
    assert store.observe_tools("notes", v1) == {"read", "write"}
    assert store.observe_tools("notes", v1) == {"read", "write"}  # seen again: no new events
    changed = {"read": ("d2", '{"name":"read","description":"now also deletes"}'), "write": v1["write"]}
    assert store.observe_tools("notes", changed) == {"write"}  # the changed tool is withheld
    assert store.observe_tools("notes", changed) == {"write"}  # ...and stays withheld, one event only
    assert [(c["tool"], c["pinned"], c["digest"]) for c in store.pending_tool_changes()] == [("read", "d1", "d2")]
    accepted = store.accept_tool_changes("cli:test")
    assert [c["tool"] for c in accepted] == ["read"]
    assert store.pending_tool_changes() == []
    assert store.observe_tools("notes", changed) == {"read", "write"}
    assert store.observe_tools("notes", v1) == {"write"}  # going back is a change too...
    assert [(c["tool"], c["pinned"], c["digest"]) for c in store.pending_tool_changes()] == [("read", "d2", "d1")]
    assert kinds(home) == [
        "tool_pinned",
        "tool_pinned",
        "tool_definition_changed",
        "tool_change_accepted",
        "tool_definition_changed",
    ]
    store.accept_tool_changes()  # ...and can be accepted like any other
    assert store.observe_tools("notes", v1) == {"read", "write"}


def test_outcome_for_an_unknown_proposal_is_refused(store: Store) -> None:
    with pytest.raises(Conflict, match="not approved"):
        store.record_commit_outcomes([{"proposal_id": "0" * 26, "outcome": "created"}])


def test_changes_see_commits_of_other_connections_only(home: Home, store: Store) -> None:
    with Reader(home.database) as r:
        changes = Changes(r, fallback=None)
        assert changes.changed()  # the first look always says yes
        assert not changes.changed()
        store.append_event(ev.INIT, "test")
        wait_until(changes.changed, 5, "the change (on PostgreSQL a NOTIFY, just after the COMMIT)")
        assert not changes.changed()
        assert Changes(r, fallback=0.0).changed() and Changes(r, fallback=0.0).changed()


def test_follower_yields_new_events_after_a_seq_with_its_filters(home: Home, store: Store) -> None:
    add_reviewer(store)
    with Reader(home.database) as r:
        everything, from_now = Follower(r, 0), Follower(r)
        only_proposals = Follower(r, 0, kind=ev.PROPOSAL_CREATED)
        assert [e[2] for e in everything.poll()] == [ev.REVIEWER_ADDED]
        assert from_now.poll() == [] and everything.poll() == []
        p = store.propose(draft())
        assert [e[2] for e in arrived(from_now)] == [ev.PROPOSAL_CREATED]
        assert [(e[0], e[4]) for e in arrived(only_proposals)] == [(2, p.id)]
        store.propose(draft("notes/b.md"))
        batches = Follower(r, 1).follow(threading.Event())
        assert [e[0] for e in next(batches)] == [2, 3]
        assert [e[0] for e in arrived(everything)] == [2, 3]


def arrived(follower: Follower) -> list[EventRow]:
    """The follower's next non-empty batch. On PostgreSQL the change signal is a NOTIFY, delivered
    just after the writer's COMMIT, so a look right after it may come first and see nothing yet."""
    return wait_until(follower.poll, 5, "the new events")


def test_no_sql_outside_the_store() -> None:
    """Every query is a named method of gatekeeper/store/: nothing else opens a connection or runs SQL."""
    package = Path(gatekeeper.__file__).parent
    sql = re.compile(r"\.execute\(|sqlite3\.connect\(|\.conn\b|\"(SELECT|INSERT|UPDATE|DELETE|PRAGMA) ")
    found = [
        f"{path.relative_to(package)}:{n}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path.parent.name != "store"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if sql.search(line)
    ]
    assert found == []
