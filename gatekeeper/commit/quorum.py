"""Reviewers for what they know (issue 15), at commit time, from the policy as it is now: every
approval of a proposal (its decision, and the ``approval`` rows a rule's ``approvals: N`` asked
for first) is checked exactly as a decision is (signature, proof), each reviewer must be within
their scope, and the proposal needs N distinct reviewers, its requester's own account not among
them. Whatever a database writer inserted, the committer acts on nothing less.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gatekeeper.commit.checks import Candidate, Plan, Refusal, check_approval, check_policy, check_proof
from gatekeeper.commit.trust import Trust
from gatekeeper.policy import Policy
from gatekeeper.policy.reviewers import approvals_needed, scope_problem


def check_all(c: Candidate, data: bytes | None, others: list[dict[str, Any]], policy: Policy, trust: Trust) -> Plan:
    """Every check before a byte is written, in order: the decision, the other approvals, the policy."""
    check_approval(c, data, trust)  # refuses missing content too
    check_proof(c, policy)
    check_quorum(c, data, others, policy, trust)
    return check_policy(c, len(data or b""), policy)


def as_candidate(c: Candidate, row: dict[str, Any]) -> Candidate:
    """An ``approval`` row as a candidate of its proposal, so it is checked as a decision is."""
    fields = {k: v for k, v in row.items() if k not in ("proposal_id", "approval_id")}
    return dataclasses.replace(c, verdict="approved", **fields)


def check_quorum(c: Candidate, data: bytes | None, others: list[dict[str, Any]], policy: Policy, trust: Trust) -> None:
    """N distinct reviewers in scope, none the requester, each approval genuine; else ``Refusal``."""
    approvals = [c]
    for row in others:
        other = as_candidate(c, row)
        try:
            check_approval(other, data, trust)
            check_proof(other, policy)
        except Refusal as exc:
            raise Refusal(f"the approval by {other.reviewer!r} does not hold: {exc}") from None
        approvals.append(other)
    for a in approvals:
        problem = scope_problem(policy, a.reviewer, c.server, c.path)
        if problem is not None:
            raise Refusal(f"{problem}; an approval outside a reviewer's scope does not count, propose again")
    needed = approvals_needed(policy, c.server, c.tool, c.path)
    counted = {a.reviewer for a in approvals} - {c.client_name}
    if len(counted) < needed:
        names = ", ".join(sorted(counted)) or "nobody"
        own = (
            f"; {c.client_name!r} requested it and never counts"
            if c.client_name in {a.reviewer for a in approvals}
            else ""
        )
        raise Refusal(
            f"the rule {c.server}.{c.tool} needs {needed} distinct reviewers' approvals, and this has "
            f"{len(counted)} ({names}){own}; have another reviewer approve"
        )
