"""``audit verify --approvals``: every approval in the store checked again as the committer checks
it, whether committed or not: each approved ``decision`` and each ``approval`` row (the first N-1 of
a rule's ``approvals: N``). For each: its Ed25519 signature over the proposal as stored now (public
keys only), the digests and path it names, and its proof (a stored passkey assertion verifies again:
challenge = its digest, origin and rp id from the policy's review_url, flags, the reviewer's passkey
not removed before it). An approval row was never HMAC-signed: one without a key id is refused.

Scopes and the number of approvals are the committer's to judge against the policy of the day
(``commit/quorum.py``); this checks that every approval on record is genuine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gatekeeper.store.queries import Reader
from gatekeeper.store.verifying import approval_rows, approved_decisions

if TYPE_CHECKING:  # the policy (pydantic) and the committer's checks load only for --approvals
    from gatekeeper.commit.checks import Candidate
    from gatekeeper.commit.trust import Trust
    from gatekeeper.policy import Policy

CHUNK = 500  # proposals whose bytes are read at once
ROW_KIND = "an approval row (one of a rule's approvals: N): "


@dataclass(frozen=True)
class ApprovalProblem:
    proposal_id: str
    reviewer: str
    problem: str  # why the approval does not hold


def verify_approvals(reader: Reader, policy: Policy, trust: Trust) -> tuple[int, list[ApprovalProblem]]:
    """Every approved decision, then every approval row: (how many were checked, the problems)."""
    checked, problems = 0, []
    for row_kind, rows in ((None, approved_decisions(reader)), (ROW_KIND, approval_rows(reader))):
        for c, content in _with_contents(reader, rows):
            checked += 1
            problem = _problem(c, content, policy, trust, approval_row=row_kind is not None)
            if problem is not None:
                problems.append(ApprovalProblem(c.id, c.reviewer, f"{row_kind or ''}{problem}"))
    return checked, problems


def _with_contents(reader: Reader, rows: list[dict[str, Any]]) -> Iterator[tuple[Candidate, bytes | None]]:
    from gatekeeper.commit.checks import Candidate

    for start in range(0, len(rows), CHUNK):
        chunk = [Candidate.from_row(r) for r in rows[start : start + CHUNK]]
        contents = reader.proposal_contents(sorted({c.id for c in chunk}))
        for c in chunk:
            yield c, contents.get(c.id)


def _problem(c: Candidate, content: bytes | None, policy: Policy, trust: Trust, *, approval_row: bool) -> str | None:
    from gatekeeper.commit.checks import Refusal, check_approval, check_proof

    if approval_row and c.key_id is None:  # never HMAC: no legacy bound applies
        return "it carries no Ed25519 signature, and approval rows always do: it was not written by the review page"
    try:
        check_approval(c, content, trust)
        check_proof(c, policy)
    except Refusal as exc:
        return str(exc)
    return None
