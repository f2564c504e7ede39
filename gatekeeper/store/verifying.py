"""What ``audit verify`` reads beyond the chain itself: events at a seq, events no checkpoint covers
(``audit/checkpoints.py``), and every approval as the committer checks it (``audit/approvals.py``).
Read-only, through a ``Reader``; the SQL is the store's SQLite dialect (PostgreSQL translates it)."""

from __future__ import annotations

import json
from typing import Any

from gatekeeper.store.events import CHECKPOINT, COMMIT_INTENT, COMMIT_OUTCOME
from gatekeeper.store.queries import CANDIDATE_SELECT, Reader

# An ``approval`` row named as ``CANDIDATE_SELECT`` names a decision, with its proposal's columns.
APPROVAL_ROWS = (
    "SELECT p.id, p.created_at, p.server, p.tool, p.workspace, p.path, p.sha256, p.size, "
    "a.id AS decision_id, 'approved' AS verdict, a.reviewer, a.reason, a.sha256 AS decision_sha256, "
    "a.path AS decision_path, a.decided_at, a.signature, p.workspace_real, p.mode, p.base_sha256, "
    "p.base_size, p.client_name, a.mode AS decision_mode, a.base_sha256 AS decision_base_sha256, "
    "a.method, a.nonce, a.assertion, a.assertion_index, a.assertion_digests, a.key_id, "
    "k.credential_id AS passkey_credential, k.reviewer AS passkey_reviewer, k.public_key AS passkey_public_key, "
    "k.label AS passkey_label, k.created_at AS passkey_created_at, k.removed_at AS passkey_removed_at, "
    "0 AS has_intent FROM approval a JOIN proposal p ON p.id = a.proposal_id "
    "LEFT JOIN passkey k ON a.assertion IS NOT NULL AND k.credential_id = json_extract(a.assertion, '$.credential_id') "
    "ORDER BY a.id"
)


def event_at(reader: Reader, seq: int) -> tuple[str, str] | None:
    """The kind and stored hash of the event at ``seq`` (None: no such event)."""
    row = reader.first("SELECT kind, hash FROM audit_event WHERE seq = ?", (seq,))
    return None if row is None else (str(row[0]), str(row[1]))


def uncovered(reader: Reader, after_seq: int, before: str) -> tuple[int | None, int]:
    """Events after ``after_seq`` and older than ``before`` (a timestamp), checkpoints aside: the
    first one's seq and how many."""
    row = reader.first(
        "SELECT min(seq), count(*) FROM audit_event WHERE seq > ? AND kind != ? AND at < ?",
        (after_seq, CHECKPOINT, before),
    )
    if row is None or not row[1]:
        return None, 0
    return int(str(row[0])), int(str(row[1]))


def approved_decisions(reader: Reader) -> list[dict[str, Any]]:
    """Every approved decision, committed or not, as ``commit_queue`` rows (``commit.checks.Candidate``)."""
    return reader.dicts(f"{CANDIDATE_SELECT} WHERE d.verdict = 'approved' ORDER BY d.id", (COMMIT_INTENT,))


def approval_rows(reader: Reader) -> list[dict[str, Any]]:
    """Every ``approval`` row (the first N-1 of a rule's ``approvals: N``), as ``Candidate`` rows."""
    return reader.dicts(APPROVAL_ROWS)


def outcomes_without_rows(reader: Reader) -> list[tuple[int, str, str]]:
    """(seq, proposal id, outcome named) of each ``commit_outcome`` event whose proposal has no
    ``commit_record`` row: the row was deleted, and a committer would hold that approval back."""
    rows = reader.dicts(
        "SELECT e.seq, e.proposal_id, e.payload FROM audit_event e WHERE e.kind = ? AND NOT EXISTS "
        "(SELECT 1 FROM commit_record c WHERE c.proposal_id = e.proposal_id) ORDER BY e.seq",
        (COMMIT_OUTCOME,),
    )
    return [(int(r["seq"]), str(r["proposal_id"]), _outcome_of(str(r["payload"]))) for r in rows]


def rows_without_outcomes(reader: Reader) -> tuple[int, list[tuple[str, str]]]:
    """How many ``commit_record`` rows there are, and (proposal id, outcome) of each without its
    ``commit_outcome`` event (the event was cut from the chain, or the row written outside Gatekeeper)."""
    row = reader.first("SELECT count(*) FROM commit_record")
    rows = reader.dicts(
        "SELECT c.proposal_id, c.outcome FROM commit_record c WHERE NOT EXISTS (SELECT 1 FROM audit_event e "
        "WHERE e.proposal_id = c.proposal_id AND +e.kind = ?) ORDER BY c.id",
        (COMMIT_OUTCOME,),
    )
    return int(str(row[0])) if row else 0, [(str(r["proposal_id"]), str(r["outcome"])) for r in rows]


def _outcome_of(payload: str) -> str:
    try:
        return str(json.loads(payload).get("outcome", "?"))
    except (ValueError, AttributeError):
        return "?"
