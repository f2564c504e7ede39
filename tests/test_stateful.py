"""Random sequences of domain operations, checked against a model after every step:
the chain verifies, every change left exactly its events, and derived statuses are right."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from gatekeeper.audit.verify import verify_chain
from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.home import Home, ensure_keys
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from tests.helpers import PROOF, TEST_HASH, draft, make_home

PATHS = ["a.md", "b.md", "dir/c.md"]
_TEMPLATE: list[Path] = []


def _template_db() -> Path:
    if not _TEMPLATE:
        tmp = Path(tempfile.mkdtemp(prefix="gk-template-"))
        home = make_home(tmp / "home")
        sqlite3.connect(home.db_path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        _TEMPLATE.append(home.db_path)
    return _TEMPLATE[0]


CONTENTS = [b"one\n", b"two\n", b"\x00\xff"]


class DomainMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.home = Home(Path(self.tmp.name) / "home")
        self.home.create()
        self.home.ensure_key()
        shutil.copyfile(_template_db(), self.home.db_path)  # migrating per example would dominate the run
        ensure_keys(self.home)
        self.key = self.home.read_key()
        self.store = Store(self.home.db_path)
        self.reader = Reader(self.home.db_path)
        self.events = 0
        self.model: dict[str, dict] = {}  # id -> {path, sha256, expired, verdict, outcome, intent, key}
        self.reviewers: dict[str, bool] = {}  # name -> enabled

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            self.reader.close()
            self.tmp.cleanup()

    def _pending_match(self, key: tuple) -> str | None:
        for pid, p in sorted(self.model.items(), reverse=True):
            if p["key"] == key and p["verdict"] is None and not p["expired"]:
                return pid
        return None

    @rule(path=st.sampled_from(PATHS), content=st.sampled_from(CONTENTS), expired=st.booleans())
    def propose(self, path: str, content: bytes, expired: bool) -> None:
        key = (path, content)  # an identical call (expiry is the policy's, not the call's)
        expected = self._pending_match(key)
        result = self.store.propose(draft(path, content, expires_in=-5 if expired else 3600))
        self.events += 1
        if expected is not None:
            assert (result.id, result.created) == (expected, False)
            return
        assert result.created and result.id not in self.model
        self.model[result.id] = {
            "path": path,
            "sha256": result.sha256,
            "expired": expired,
            "verdict": None,
            "outcome": None,
            "intent": False,
            "key": key,
        }

    @rule(name=st.sampled_from(["alice", "bob"]))
    def add_reviewer(self, name: str) -> None:
        try:
            self.store.add_reviewer(name, TEST_HASH)
        except Conflict:
            assert name in self.reviewers
            return
        assert name not in self.reviewers
        self.reviewers[name] = True
        self.events += 1

    @rule(name=st.sampled_from(["alice", "bob"]))
    def disable_reviewer(self, name: str) -> None:
        try:
            self.store.disable_reviewer(name)
        except (Conflict, NotFound):
            assert not self.reviewers.get(name, False)
            return
        assert self.reviewers[name]
        self.reviewers[name] = False
        self.events += 1

    @precondition(lambda self: self.model)
    @rule(
        data=st.data(),
        verdict=st.sampled_from(["approved", "rejected"]),
        reviewer=st.sampled_from(["alice", "bob"]),
        tamper=st.sampled_from([None, "sha256", "path"]),
    )
    def decide(self, data: st.DataObject, verdict: str, reviewer: str, tamper: str | None) -> None:
        pid = data.draw(st.sampled_from(list(self.model)))  # creation order: ULIDs of one ms sort at random
        p = self.model[pid]
        sha256 = "f" * 64 if tamper == "sha256" else p["sha256"]
        path = "elsewhere.md" if tamper == "path" else p["path"]
        should_work = (
            self.reviewers.get(reviewer, False)
            and p["verdict"] is None
            and tamper is None
            and not (verdict == "approved" and p["expired"])
        )
        self.events += 1  # a decision or a refusal: either way one event
        try:
            self.store.decide(
                pid,
                verdict=verdict,
                reviewer=reviewer,
                sha256=sha256,
                path=path,
                reason="because" if verdict == "rejected" else None,
                proof=PROOF,
            )
        except (Conflict, InvalidInput):
            assert not should_work
            return
        assert should_work
        p["verdict"] = verdict

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def intents(self, data: st.DataObject) -> None:
        """The committer's batch: several ids (repeats included) in one transaction."""
        pids = data.draw(st.lists(st.sampled_from(list(self.model)), min_size=1, max_size=3))
        states = self.store.record_commit_intents(pids)
        expected: dict[str, str] = {}
        for pid in pids:
            p = self.model[pid]
            if p["verdict"] != "approved":
                expected[pid] = "not approved"
            elif p["outcome"] is not None:
                expected[pid] = "done"
            elif p["intent"]:
                expected[pid] = "existing"
            else:
                expected[pid] = "new"
                p["intent"] = True
                self.events += 1
        assert states == expected

    @precondition(lambda self: any(p["intent"] for p in self.model.values()))
    @rule(data=st.data())
    def outcomes(self, data: st.DataObject) -> None:
        """The committer's batch of outcomes: a proposal that already has one is skipped, never written twice."""
        with_intent = [k for k, p in self.model.items() if p["intent"]]
        items = data.draw(
            st.lists(
                st.tuples(st.sampled_from(with_intent), st.sampled_from(["created", "conflict", "refused", "failed"])),
                min_size=1,
                max_size=3,
            )
        )
        recorded = self.store.record_commit_outcomes([{"proposal_id": pid, "outcome": o} for pid, o in items])
        expected: dict[str, bool] = {}
        for pid, outcome in items:
            p = self.model[pid]
            expected[pid] = p["outcome"] is None
            if p["outcome"] is None:
                p["outcome"] = outcome
                self.events += 1
        assert recorded == expected

    @rule(kind=st.sampled_from(["tool_denied", "proposal_refused"]), n=st.integers(0, 10**12))
    def refusal(self, kind: str, n: int) -> None:
        self.store.append_event(kind, "proxy", {"n": n, "text": "caf\u00e9 \u202e"})
        self.events += 1

    @invariant()
    def chain_verifies_and_counts_match(self) -> None:
        if not hasattr(self, "reader"):
            return
        report = verify_chain(self.reader)
        assert report.ok, report.problem
        assert report.count == self.events

    @invariant()
    def statuses_are_derived_correctly(self) -> None:
        if not hasattr(self, "reader"):
            return
        actual = {r.id: r.status for r in self.reader.proposals(limit=None)}
        expected = {}
        for pid, p in self.model.items():
            if p["outcome"] is not None:
                expected[pid] = "committed" if p["outcome"] == "created" else p["outcome"]
            elif p["verdict"] is not None:
                expected[pid] = p["verdict"]
            else:
                expected[pid] = "expired" if p["expired"] else "pending"
        assert actual == expected
        for status in set(expected.values()):
            listed = {r.id for r in self.reader.proposals(status=status, limit=None)}
            assert listed == {k for k, v in expected.items() if v == status}


DomainMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestDomain = DomainMachine.TestCase
