"""Commit records: the ``commit_intent`` event before a file step and the one outcome after it,
several proposals per transaction (the committer's batches)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gatekeeper.canonical import now_ts
from gatekeeper.errors import Conflict, InvalidInput
from gatekeeper.store import events as ev
from gatekeeper.store.tx import Transactions, Tx

if TYPE_CHECKING:
    from gatekeeper.store.queries import Reader
from gatekeeper.store.values import OUTCOMES

CHUNK = 500  # ids per IN (...): under SQLite's bound-parameter limit
# A proposal's commit_outcome event, whatever commit_record says ('+e.kind': the proposal_id index).
_IN_CHAIN = "EXISTS (SELECT 1 FROM audit_event e WHERE e.proposal_id = {id} AND +e.kind = ?)"


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def _marks(chunk: list[str]) -> str:
    return ", ".join("?" * len(chunk))


class CommitRecords(Transactions):
    """The ``commit_record`` table and the commit events."""

    def record_commit_intents(
        self, proposal_ids: list[str], actor: str = "committer", before_commit: Callable[[], None] | None = None
    ) -> dict[str, str]:
        """In one transaction, append the ``commit_intent`` event of each proposal about to get its file step.

        Per id: ``"new"`` (appended now), ``"existing"`` (an earlier or concurrent attempt already
        wrote one: finish it without a second), ``"done"`` (it has an outcome: skip it) or
        ``"not approved"``. ``before_commit`` (no arguments) runs inside the transaction just
        before COMMIT, so crash tests can kill the process there.
        """

        def work(tx: Tx) -> dict[str, str]:
            states: dict[str, str] = {}
            known = _intent_state(tx, proposal_ids)
            for pid in proposal_ids:
                row = known.get(pid)
                if row is None or row[2] != "approved":
                    states[pid] = "not approved"
                elif row[3] is not None:
                    states[pid] = "done"
                elif row[5]:  # at most once rests on the chain too: a deleted commit_record row does not reopen it
                    states[pid] = "outcome in chain"
                elif row[4] or pid in states:  # a repeat in this batch: its intent is already written
                    states[pid] = "existing"
                else:
                    tx.append_event(ev.COMMIT_INTENT, actor, {"path": row[0], "sha256": row[1]}, pid)
                    states[pid] = "new"
            if before_commit is not None:
                before_commit()
            return states

        # Idempotent: after a lost COMMIT the second run finds the intents ("existing").
        return self.retrying(work)

    def record_commit_outcomes(
        self,
        outcomes: list[dict[str, Any]],
        actor: str = "committer",
        after_row: Callable[[str], None] | None = None,
    ) -> dict[str, bool]:
        """In one transaction, each outcome row with its ``commit_outcome`` event.

        Each item has ``proposal_id``, ``outcome`` and optionally ``detail``, ``observed_sha256``,
        ``final_path``. A proposal that already has an outcome (another committer was faster) is
        skipped: False in the result, nothing written for it. ``after_row(proposal_id)`` runs
        between a row and its event, inside the transaction (crash tests).
        """
        for item in outcomes:
            if item["outcome"] not in OUTCOMES:
                raise InvalidInput(f"unknown outcome {item['outcome']!r}", f"use one of {', '.join(OUTCOMES)}")

        def work(tx: Tx) -> dict[str, bool]:
            recorded: dict[str, bool] = {}
            state = _outcome_state(tx, [item["proposal_id"] for item in outcomes])
            for item in outcomes:
                pid = item["proposal_id"]
                verdict, outcome, in_chain = state.get(pid, (None, None, False))
                if outcome is not None or in_chain or pid in recorded:  # never a second outcome
                    recorded[pid] = False
                    continue
                if verdict != "approved":
                    raise Conflict(f"proposal {pid} is not approved; it cannot have a commit outcome")
                fields = {
                    "outcome": item["outcome"],
                    "observed_sha256": item.get("observed_sha256"),
                    "final_path": item.get("final_path"),
                    "detail": item.get("detail") or "",
                }
                tx.insert("commit_record", {"proposal_id": pid, **fields, "at": now_ts()})
                if after_row is not None:
                    after_row(pid)
                tx.append_event(ev.COMMIT_OUTCOME, actor, fields, pid)
                recorded[pid] = True
            return recorded

        # Idempotent: after a lost COMMIT the second run finds the outcome and writes nothing twice
        # (that proposal then reads False, as if another committer had been faster).
        return self.retrying(work)

    def record_commit_refusals(self, refusals: list[tuple[str, dict[str, Any]]], actor: str = "committer") -> None:
        """In one transaction, a ``commit_replay_refused`` event per (proposal id, payload): an
        approval held back because it was applied already (``commit/held.py``); no row changes."""

        def work(tx: Tx) -> None:
            for pid, payload in refusals:
                tx.append_event(ev.COMMIT_REPLAY_REFUSED, actor, payload, pid)

        self.retrying(work)


def outcome_ids(reader: Reader) -> list[str]:
    """The proposals that have an outcome row, oldest first (a committer's new journal starts with them)."""
    return [str(r["proposal_id"]) for r in reader.dicts("SELECT proposal_id FROM commit_record ORDER BY id")]


def _intent_state(tx: Tx, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    """id -> (path, sha256, verdict, outcome, has an intent event, has an outcome event)."""
    known: dict[str, tuple[Any, ...]] = {}
    # '+e.kind' keeps SQLite on the proposal_id index: on the kind index, each lookup scanned
    # every intent ever written (a batch of 64 took 13 ms after 1,000 commits, growing).
    for chunk in _chunks(ids):
        for row in tx.all(
            "SELECT p.id, p.path, p.sha256, d.verdict, c.outcome, EXISTS (SELECT 1 FROM audit_event e "
            "WHERE e.proposal_id = p.id AND +e.kind = ?), "
            f"{_IN_CHAIN.format(id='p.id')} FROM proposal p "
            "LEFT JOIN decision d ON d.proposal_id = p.id "
            f"LEFT JOIN commit_record c ON c.proposal_id = p.id WHERE p.id IN ({_marks(chunk)})",
            (ev.COMMIT_INTENT, ev.COMMIT_OUTCOME, *chunk),
        ):
            known[row[0]] = row[1:]
    return known


def _outcome_state(tx: Tx, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    """id -> (verdict, outcome, has an outcome event) of each decided proposal."""
    state: dict[str, tuple[Any, ...]] = {}
    for chunk in _chunks(ids):
        for row in tx.all(
            f"SELECT d.proposal_id, d.verdict, c.outcome, {_IN_CHAIN.format(id='d.proposal_id')} FROM decision d "
            "LEFT JOIN commit_record c ON c.proposal_id = d.proposal_id "
            f"WHERE d.proposal_id IN ({_marks(chunk)})",
            (ev.COMMIT_OUTCOME, *chunk),
        ):
            state[row[0]] = row[1:]
    return state
