"""The reads that both the pages and ``/api/`` make about proposals, with their refusals."""

from __future__ import annotations

from typing import Any

from gatekeeper.review import queue
from gatekeeper.review.errors import ReviewError
from gatekeeper.review.state import ReviewState
from gatekeeper.store.queries import STATUSES, ProposalRow, Reader


def status_filter(status: str | None) -> str | None:
    """A ``?status=`` value as the store takes it: ``None`` for all, else a known status."""
    if status in (None, "", "all"):
        return None
    if status not in STATUSES:
        raise ReviewError(400, f"Unknown status {status!r}; use one of {', '.join(STATUSES)}.")
    return status


def detail(state: ReviewState, proposal_id: str) -> dict[str, Any]:
    """One proposal with its events and the other pending proposals for the same path."""
    with state.reader() as r:
        found = r.proposal(proposal_id)
        if found is None:
            raise ReviewError(404, f"No proposal {proposal_id}.")
        found["others"] = queue.other_pending_for_path(r, proposal_id, found["path"], found["workspace"])
        found["approved_by"] = [a["reviewer"] for a in r.approvals([proposal_id]).get(proposal_id, [])]
    return found


def approvals_view(state: ReviewState, found: dict[str, Any]) -> dict[str, Any]:
    """Who approved so far (the first N-1 of a rule's ``approvals: N``) and how many more are needed."""
    from gatekeeper.policy.reviewers import approvals_needed

    policy = state.rules.policy
    needed = 1 if policy is None else approvals_needed(policy, found["server"], found["tool"], found["path"])
    by: list[str] = found["approved_by"]
    return {"by": by, "needed": needed, "more": max(0, needed - len(by))}


def queue_approvals(state: ReviewState, reader: Reader, rows: list[ProposalRow]) -> dict[str, dict[str, int]]:
    """For each pending proposal on the page whose rule needs more than one approval: how many it
    has and needs ("1 of 2" in the queue, as the proposal page says it)."""
    from gatekeeper.policy.reviewers import approvals_needed

    policy = state.rules.policy
    if policy is None:
        return {}
    needs = {r.id: approvals_needed(policy, r.server, r.tool, r.path) for r in rows if r.status == "pending"}
    needs = {pid: n for pid, n in needs.items() if n > 1}
    have = reader.approvals(list(needs)) if needs else {}
    return {pid: {"have": len(have.get(pid, [])), "needed": n} for pid, n in needs.items()}
