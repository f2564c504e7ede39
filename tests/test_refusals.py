"""Refusal events: bounded fields, identical repeats counted, and what a crash can lose."""

from __future__ import annotations

import json

from gatekeeper.home import Home
from gatekeeper.store.bounded import bounded
from gatekeeper.store.refusals import Refusals
from gatekeeper.store.store import Store


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def events(store: Store) -> list[tuple[int, str, dict[str, object]]]:
    with store.transaction() as conn:
        found = conn.all("SELECT seq, kind, payload FROM audit_event ORDER BY seq")
    return [(seq, kind, json.loads(payload)) for seq, kind, payload in found]


def test_strings_are_cut_with_their_length_and_containers_bounded() -> None:
    out = bounded(
        {"host": "h" * 12_000, "ok": "short", "n": 3, "list": list(range(50)), "deep": {"a": {"b": {"c": {}}}}}
    )
    assert out["host"] == "h" * 200 + "…[cut: 12000 chars]" and out["ok"] == "short" and out["n"] == 3
    assert len(out["list"]) == 21 and out["list"][-1] == "30 more items not kept"
    assert out["deep"]["a"]["b"]["c"] == "[object of 0 keys not kept]"


def test_identical_refusals_are_stored_once_and_counted(home: Home, store: Store) -> None:
    clock = Clock()
    refusals = Refusals(store, window=10, clock=clock)
    for _ in range(5):
        refusals.record("request_refused", "review", {"why": "bad host"})
    refusals.record("request_refused", "review", {"why": "another reason"})
    assert [k for _s, k, _p in events(store)] == ["request_refused", "request_refused"]
    clock.now += 9
    refusals.flush_due()  # inside the window: still counting
    assert len(events(store)) == 2
    clock.now += 1
    refusals.flush_due()
    first_seq = events(store)[0][0]
    assert events(store)[2][1:] == (
        "refusal_repeated",
        {
            "kind": "request_refused",
            "first_seq": first_seq,
            "repeats": 4,
            "last_at": events(store)[2][2]["last_at"],
            "why": f"refusal #{first_seq} repeated 4 more times",
        },
    )
    refusals.record("request_refused", "review", {"why": "bad host"})  # a new window: stored whole again
    assert events(store)[-1][1:] == ("request_refused", {"why": "bad host"})


def total(store: Store) -> int:
    """Refusals the log accounts for: each stored whole, plus every counted repeat."""
    found = events(store)
    return sum(1 for _s, k, _p in found if k == "request_refused") + sum(
        int(str(p["repeats"])) for _s, k, p in found if k == "refusal_repeated"
    )


def test_unflushed_counts_are_bounded(home: Home, store: Store) -> None:
    """A crash loses only counters not yet flushed: never MAX_PENDING repeats or more."""
    refusals = Refusals(store, window=3600, max_pending=10, clock=Clock())
    for _ in range(25):
        refusals.record("request_refused", "review", {"why": "flood"})
    assert 25 - total(store) < 10 and len(events(store)) <= 6  # what a crash now would leave
    refusals.flush_all()  # a clean stop
    assert total(store) == 25


def test_uncoalesced_refusals_are_each_stored_but_bounded(home: Home, store: Store) -> None:
    refusals = Refusals(store, clock=Clock())
    for _ in range(3):
        refusals.record("login_failed", "review", {"username": "alice", "why": "x" * 500}, coalesce=False)
    stored = events(store)
    assert len(stored) == 3 and all(len(str(p["why"])) < 230 for _s, _k, p in stored)
