"""Audit event kinds: the one registry. Free text in the database; named here so callers do not
misspell them, and so a reader finds every kind in one place. No kind is spelled as a string
literal anywhere else in gatekeeper/ (tests/test_event_kinds.py scans for them)."""

from __future__ import annotations

INIT = "init"
DB_UPGRADE = "db_upgrade"
PROPOSAL_CREATED = "proposal_created"
PROPOSAL_REPEATED = "proposal_repeated"
PROPOSAL_REFUSED = "proposal_refused"
REVERT_PROPOSED = "revert_proposed"  # follows proposal_created: that proposal restores what another changed
TOOL_DENIED = "tool_denied"
REQUEST_REFUSED = "request_refused"  # a host message the proxy could not take (see proxy/host/oracle.py)
DECISION = "decision"
DECISION_REFUSED = "decision_refused"
# One of a rule's `approvals: N`, short of N (store/quorum.py): the decision's fields, {approvals, needed}.
APPROVAL_RECORDED = "approval_recorded"
COMMIT_INTENT = "commit_intent"
COMMIT_OUTCOME = "commit_outcome"
# An approval the database shows as not applied, held back because it was (commit/held.py): its
# commit_outcome event is still in the chain without its commit_record row, or the committer's own
# journal has it. No commit_record row; nothing written: {why, path, sha256}.
COMMIT_REPLAY_REFUSED = "commit_replay_refused"
REVIEWER_ADDED = "reviewer_added"
REVIEWER_DISABLED = "reviewer_disabled"
REVIEWER_PASSWORD = "reviewer_password_changed"
# A reviewer or passkey row refused at log-in or approval (store/signed_rows.py): its signature does not
# verify for the reviewer's latest change event (written outside Gatekeeper, or an older row put back):
# {reviewer, why} (and credential_id for a passkey).
REVIEWER_ROW_REFUSED = "reviewer_row_refused"
# A reviewer / passkey row made before Ed25519 keys, signed as it was when the first key was made
# (trusted on first use, home.ensure_keys): {reviewer, key_id, signature} (and credential_id).
REVIEWER_ROW_SIGNED = "reviewer_row_signed"
PASSKEY_ROW_SIGNED = "passkey_row_signed"
TOOL_PINNED = "tool_pinned"
TOOL_DEFINITION_CHANGED = "tool_definition_changed"
TOOL_CHANGE_ACCEPTED = "tool_change_accepted"
SERVER_STARTED = "server_started"
SERVER_FAILED = "server_failed"
SERVER_EXITED = "server_exited"
# A stdio server wrote a line longer than the proxy takes (proxy/protocol/framing.py): {server, why, size, limit};
# its pending calls failed and it was ended, to start again on the next call.
SERVER_OUTPUT_REFUSED = "server_output_refused"
# A url server whose name resolved to an address the policy does not allow (proxy/servers/url/addresses.py):
# {server, host, address, why}; no connection was made.
SERVER_REFUSED = "server_refused"
TOOLS_LISTED_WITHOUT = "tools_listed_without"  # tools/list answered without a broken server's tools
PROXY_STARTED = "proxy_started"
HANDOFF_RESUMED = "handoff_resumed"  # a 2026 host came back after the review-page hand-off
LOGIN = "login"
LOGIN_FAILED = "login_failed"
LOGIN_LINK_ISSUED = "login_link_issued"
LOGOUT = "logout"
PASSKEY_ENROLMENT_ISSUED = "passkey_enrolment_issued"  # a one-time enrolment link was printed
PASSKEY_ADDED = "passkey_added"
PASSKEY_REMOVED = "passkey_removed"
# An approval whose proof (assertion or password) did not hold: nothing was decided; the payload says why.
APPROVAL_REFUSED = "approval_refused"
# A passkey challenge not issued: the reviewer has store/passkeys.MAX_OPEN_CHALLENGES open already
# (a session alone can ask for them): {reviewer, open, limit}; repeats are counted (store/refusals.py).
CHALLENGE_REFUSED = "approval_challenge_refused"
# The review side's Ed25519 signature over the chain head {seq, hash, key_id, signature} (store/checkpoints.py):
# rewriting history and recomputing every later hash no longer passes `audit verify` without the key.
CHECKPOINT = "chain_checkpoint"
KEY_ROTATED = "key_rotated"  # `gatekeeper keys rotate`: {old_key_id, key_id}
# "The refusal stored as event `first_seq` happened N more times": see gatekeeper/store/refusals.py.
REFUSAL_REPEATED = "refusal_repeated"

# Every kind above, for checks that need the whole set (derived, so it cannot fall out of step).
KINDS: frozenset[str] = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)
