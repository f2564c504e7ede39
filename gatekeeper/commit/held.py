"""Approvals the committer holds back because the database contradicts what it knows was done.

Two sources say an approval was applied whatever ``commit_record`` says: the committer's own
journal in its home (``journal.py``), and a ``commit_outcome`` event still in the chain. Either way
the approval is never applied again: nothing is written, a ``commit_replay_refused`` event says why
(once per committer process and proposal, so ``commit --watch`` does not fill the log), the
journal keeps the refusal for every later run, and the pass reports it as waiting (exit status 1).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gatekeeper.commit import swap
from gatekeeper.commit.journal import JOURNAL_NAME, Entry, Journal, JournalError
from gatekeeper.store.commits import outcome_ids
from gatekeeper.workspace import beneath

if TYPE_CHECKING:
    from gatekeeper.commit.checks import Candidate
    from gatekeeper.home import Home
    from gatekeeper.policy import Policy
    from gatekeeper.store.queries import Reader
    from gatekeeper.store.store import Store

ACT, RECORD = "act", "record"


def judge(entry: Entry | None, has_intent: bool) -> str:
    """``act`` (as usual, or finish an interrupted attempt from the disk), ``record`` (the file
    step is done: record the journaled outcome, touch nothing), else why the approval is held."""
    if entry is None or (entry.step == "intent" and has_intent):
        return ACT
    if entry.step == "done" and has_intent and entry.outcome is not None:
        return RECORD
    if entry.step == "refused":
        return f"this committer refused it before ({entry.at}) because the database had lost its outcome"
    if entry.step in ("done", "recorded") and has_intent:
        return f"this committer's journal has its outcome recorded ({entry.at}), but the database has no outcome for it"
    return (
        f"this committer's journal has it {'begun' if entry.step == 'intent' else 'applied'} ({entry.at}), but the "
        "database has neither its outcome nor its commit_intent event"
    )


def in_chain_reason() -> str:
    return "the audit chain has its commit_outcome event, but the database has no commit_record row for it"


def held_message(proposal_id: str, why: str) -> str:
    """What ``commit`` prints (and ``--watch`` logs) for a held approval: the problem, then what to do."""
    return (
        f"proposal {proposal_id} was already applied: {why} (rows or events were deleted from the database); "
        "it is never applied twice, nothing was written; run `gatekeeper audit verify --approvals --files`"
    )


@dataclass
class Gate:
    """The journal, and the refusals this process has recorded already."""

    journal: Journal
    store: Store
    actor: str
    said: dict[str, str] = field(default_factory=dict)  # proposal id -> what this process said of it

    @classmethod
    def of(cls, home: Home, store: Store, actor: str) -> Gate:
        return cls(Journal(home.path / JOURNAL_NAME), store, actor)

    def hold(self, held: list[tuple[Candidate, str]]) -> list[str]:
        """Record each refusal (event once per process; journal once for good); the messages to report."""
        fresh = [(c, why) for c, why in held if c.id not in self.said]
        if fresh:
            self.store.record_commit_refusals(
                [(c.id, {"why": why, "path": c.path, "sha256": c.sha256}) for c, why in fresh], self.actor
            )
            self.journal.append(
                "refused",
                [{"proposal": c.id, "why": why} for c, why in fresh if (e := self.journal.get(c.id)) is None
                 or e.step != "refused"],
            )  # fmt: skip
            self.said.update((c.id, held_message(c.id, why)) for c, why in fresh)
        return [self.said[c.id] for c, _ in held]  # the same words every pass: ``--watch`` says it once

    def seed(self, reader: Reader) -> None:
        """A home without a journal yet (a committer from before it, or a new machine): every outcome
        the database has now counts as recorded, trusted as it is on first use."""
        if self.journal.path.exists():
            return
        self.journal.append("recorded", [{"proposal": pid, "seeded": True} for pid in outcome_ids(reader)])

    def intent(self, items: list[Candidate]) -> None:
        """Before any file step: the batch's intents, durable in the home."""
        self.journal.append("intent", [_intent(c) for c in items])

    def done(self, records: list[dict[str, Any]]) -> None:
        """Before the outcome rows: what the file steps did, durable in the home."""
        self.journal.append("done", [{"proposal": r["proposal_id"], "outcome": r} for r in records])

    def recorded(self, proposal_ids: list[str]) -> None:
        """After the outcome rows (not fsynced, and not needed: if lost, the ``done`` line stands in for it)."""
        with contextlib.suppress(JournalError):
            self.journal.append("recorded", [{"proposal": pid} for pid in proposal_ids], sync=False)


def _intent(c: Candidate) -> dict[str, Any]:
    return {
        "proposal": c.id,
        "decision": c.decision_id,
        "path": c.path,
        "mode": c.mode,
        "sha256": c.sha256,
        "base_sha256": c.base_sha256,
    }


def sweep_recorded(c: Candidate, policy: Policy, state_of: Callable[[str], dict[str, Any] | None]) -> None:
    """After a change's journaled outcome is recorded: its temporary name (the base, kept by the
    swap) is removed as the next pass in that folder would (``swap.sweep``). Only in the workspace
    the current policy gives its server, beneath the root without following links; a folder that
    cannot be opened keeps it for a later sweep."""
    server = policy.servers.get(c.server)
    if c.mode == "create" or server is None or str(server.workspace) != c.workspace:
        return
    with contextlib.suppress(OSError):
        root = beneath.open_root(server.workspace)
        try:
            folder = beneath.open_folder(root, c.path.split("/")[:-1])
            try:
                swap.sweep(folder, state_of)
            finally:
                os.close(folder)
        finally:
            os.close(root)
