"""Audit event kinds. Free text in the database; named here so callers do not misspell them."""

from __future__ import annotations

INIT = "init"
DB_UPGRADE = "db_upgrade"
PROPOSAL_CREATED = "proposal_created"
PROPOSAL_REPEATED = "proposal_repeated"
PROPOSAL_REFUSED = "proposal_refused"
TOOL_DENIED = "tool_denied"
DECISION = "decision"
DECISION_REFUSED = "decision_refused"
COMMIT_INTENT = "commit_intent"
COMMIT_OUTCOME = "commit_outcome"
REVIEWER_ADDED = "reviewer_added"
REVIEWER_DISABLED = "reviewer_disabled"
REVIEWER_PASSWORD = "reviewer_password_changed"
