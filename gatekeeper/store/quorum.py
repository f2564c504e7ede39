"""Reviewers for what they know (issue 15), at decide time: a reviewer outside their policy scope
decides nothing, the requester's own account never approves, one reviewer counts once, and under a
rule's ``approvals: N`` the first N-1 approvals are ``approval`` rows (signed and proven as decisions
are) while the Nth is the ``decision`` that makes the proposal approved. A rejection by anyone in
scope rejects at once.

The requester: a proposal records no user account, only the name its MCP host gave itself
(``client_name``). A reviewer of that very name is taken to be the requester and never counts.

The committer checks all of it again from the policy as it is then (``commit/quorum.py``): this
side only keeps the queue honest; it is not what the file write rests on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gatekeeper.errors import Conflict
from gatekeeper.store.tx import Tx

if TYPE_CHECKING:
    from gatekeeper.store.decisions import Posted
    from gatekeeper.store.proofs import ApprovalRules


@dataclass(frozen=True)
class Count:
    """How many approvals a proposal has before this one, and how many its rule needs."""

    have: int
    needed: int

    @property
    def completes(self) -> bool:
        """This approval is the last one needed: it becomes the decision."""
        return self.have + 1 >= self.needed


def requester(tx: Tx, proposal_id: str) -> str | None:
    row = tx.first("SELECT client_name FROM proposal WHERE id = ?", (proposal_id,))
    return None if row is None else row[0]


def count(tx: Tx, p: Posted, rules: ApprovalRules) -> Count:
    """The approvals recorded so far for ``p``'s proposal and the number its rule asks for."""
    from gatekeeper.policy.reviewers import approvals_needed

    have = tx.first("SELECT count(*) FROM approval WHERE proposal_id = ?", (p.proposal_id,))
    row = tx.first("SELECT server, tool, path FROM proposal WHERE id = ?", (p.proposal_id,))
    needed = 1 if rules.policy is None or row is None else approvals_needed(rules.policy, *row)
    return Count(int(have[0]) if have else 0, needed)


def refusal(tx: Tx, p: Posted, rules: ApprovalRules) -> tuple[str, Exception] | None:
    """Why this reviewer may not decide this proposal (the event's words, the caller's error); None if they may."""
    row = tx.first("SELECT server, path, client_name FROM proposal WHERE id = ?", (p.proposal_id,))
    if row is None:
        return None  # decision_refusal names the missing proposal
    server, path, client = row
    if rules.policy is not None:
        from gatekeeper.policy.reviewers import scope_problem

        problem = scope_problem(rules.policy, p.reviewer, server, path)
        if problem is not None:
            return "outside the reviewer's scope", Conflict(
                problem, "ask a reviewer whose scope covers it, or widen reviewers in the policy"
            )
    if p.verdict != "approved":
        return None
    if client is not None and client == p.reviewer:
        return "the requester's own account", Conflict(
            f"proposal {p.proposal_id} was requested by {client!r} (its MCP client's name): "
            "the requester's own account never approves it",
            "another reviewer must approve it",
        )
    if tx.first("SELECT 1 FROM approval WHERE proposal_id = ? AND reviewer = ?", (p.proposal_id, p.reviewer)):
        return "already approved by this reviewer", Conflict(
            f"you have already approved proposal {p.proposal_id}; one reviewer counts once",
            "another reviewer must approve it",
        )
    return None
