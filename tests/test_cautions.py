"""``gatekeeper.content.cautions`` and the store's side of it (``store/cautioned.py``), on SQLite and on
PostgreSQL: what a proposal's warnings are, that a batch approval refuses a proposal with one (the
challenge and the approval, whole, with an event), and the queue's read of them. The page over real
HTTP and in Chromium: test_review_cautions.py."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from gatekeeper.canonical import sha256_hex
from gatekeeper.content.cautions import LARGE, cautions
from gatekeeper.errors import Conflict
from gatekeeper.home import Home
from gatekeeper.review import queue
from gatekeeper.store import events as ev
from gatekeeper.store.decisions import Shown
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from tests.helpers import add_reviewer, draft
from tests.passkey_support import RULES, enrol, sign
from tests.pg_support import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_warning_counts_what_the_page_counts() -> None:
    """Control characters the page prints escaped in the arguments (JSON) are not counted; a tab is
    text; a change's base is read too, and a delete's removed bytes; size is either side's."""
    assert cautions(mode="create", size=3, base_size=None, content=b"ok\n", base=None, arguments='{"a": "b\\n"}') == []
    assert cautions(mode="create", size=4, base_size=None, content=b"a\tb\n", base=None, arguments="{}") == []
    gone = cautions(mode="delete", size=0, base_size=4, content=b"", base="a\u200bb".encode(), arguments="{}")
    assert [c.text for c in gone] == ["1 invisible character in the content: U+200B"]
    big = cautions(mode="append", size=10, base_size=LARGE + 5, content=None, base=None, arguments="{}")
    assert [c.text for c in big] == ["large: 66 KB (65,541 bytes), over 64 KiB"]
    exactly = cautions(mode="create", size=LARGE, base_size=None, content=b"x" * LARGE, base=None, arguments="{}")
    assert exactly == []  # 64 KiB itself is not over
    binary = cautions(mode="replace", size=2, base_size=2, content=b"ok", base=b"\xff\xfe", arguments="{}")
    assert [c.kind for c in binary] == ["binary"]


def events(store: Store, kind: str) -> list[tuple[str, dict[str, Any]]]:
    with store.transaction() as tx:
        found = tx.all("SELECT proposal_id, payload FROM audit_event WHERE kind = ? ORDER BY seq", (kind,))
    return [(str(pid), json.loads(payload)) for pid, payload in found]


def test_a_batch_refuses_a_warned_proposal_whole(home: Home, store: Store) -> None:
    add_reviewer(store)
    auth = enrol(store)
    plain = store.propose(draft("notes/plain.md", b"plain\n"))
    binary = store.propose(draft("notes/b.bin", b"\x00\xff\x00"))
    change = dataclasses.replace(draft("notes/c.md", b"new\n"), mode="replace", base="old\u200b\n".encode())
    edited = store.propose(change)
    with Reader(home.database) as reader:
        rows = reader.proposals(status="pending")
        found = queue.cautions(reader, rows)
    assert {pid: [c.kind for c in cs] for pid, cs in found.items()} == {binary.id: ["binary"], edited.id: ["invisible"]}

    with pytest.raises(Conflict, match=r"Nothing was approved: 2 of the 3 selected proposals carry warnings"):
        store.issue_challenge("alice", [plain.id, binary.id, edited.id], batch=True)
    assert [pid for pid, _ in events(store, ev.DECISION_REFUSED)] == [binary.id, edited.id]
    # The one proposal's own challenge (as its page asks), signed and sent as a selection: refused.
    proof = sign(auth, store.issue_challenge("alice", [edited.id]))
    with pytest.raises(Conflict, match=r"notes/c\.md"):
        store.approve_batch(
            [Shown(edited.id, edited.sha256, "notes/c.md", "replace", sha256_hex(change.base or b""))],
            reviewer="alice",
            proof=proof,
            rules=RULES,
        )
    with store.transaction() as tx:
        assert tx.all("SELECT proposal_id FROM decision") == []
    refused = events(store, ev.DECISION_REFUSED)[-1]
    assert refused[0] == edited.id and refused[1]["cautions"] == ["1 invisible character in the content: U+200B"]
    # The plain one goes in a batch.
    proof = sign(auth, store.issue_challenge("alice", [plain.id], batch=True))
    store.approve_batch([Shown(plain.id, plain.sha256, "notes/plain.md")], reviewer="alice", proof=proof, rules=RULES)
    with store.transaction() as tx:
        assert tx.all("SELECT proposal_id FROM decision") == [(plain.id,)]
