"""The tables, as SQLModel classes. Migrations in ``migrations/`` create them; this mirrors them.
Only migrations and tests import it: the store itself writes with plain sqlite3.

Audit-bearing tables (proposal, decision, commit_record, audit_event) are append-only:
triggers refuse UPDATE and DELETE. A proposal's status is derived from which rows exist.
Times are canonical UTC text (see ``gatekeeper.canonical.format_ts``) so that they hash exactly.
"""

from __future__ import annotations

from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field, SQLModel

# The values some columns may hold are in ``values`` (the writers need them without SQLModel).


class Proposal(SQLModel, table=True):
    __tablename__ = "proposal"

    id: str = Field(primary_key=True, max_length=26)
    created_at: str = Field(index=True)
    server: str
    tool: str
    arguments: str  # canonical JSON of the exact argument object received
    args_sha256: str  # digest of ``arguments``: finds an identical pending retry
    workspace: str  # absolute workspace root at proposal time
    path: str = Field(index=True)  # normalised, relative, POSIX
    content: bytes  # the result: the whole file after the change (empty for delete)
    sha256: str
    size: int
    encoding: str = "text"
    client_name: str | None = None
    client_version: str | None = None
    protocol_version: str | None = None
    session_id: str | None = None
    policy_digest: str
    expires_at: str = Field(index=True)
    # The workspace root's resolved real path at proposal time (migration 0004); NULL on older rows.
    workspace_real: str | None = None
    # Changes to existing files (migration 0006): the mode, and the exact bytes read at the
    # destination when the proposal was made (NULL for create), which the change applies over.
    mode: str = "create"
    base: bytes | None = None
    base_sha256: str | None = None
    base_size: int | None = None


class Decision(SQLModel, table=True):
    __tablename__ = "decision"

    id: int | None = Field(default=None, primary_key=True)
    proposal_id: str = Field(foreign_key="proposal.id", unique=True)
    verdict: str
    reviewer: str
    reason: str | None = None
    sha256: str  # what the reviewer's page showed and posted back
    path: str
    decided_at: str
    signature: str  # Ed25519 (hex) by ``key_id``; before 0008 HMAC-SHA256 with secret.key
    # What the page showed and posted back with the digest (migration 0006); NULL on older rows.
    mode: str | None = None
    base_sha256: str | None = None
    # The reviewer's proof (migration 0007); NULL on older rows. method: 'passkey' or 'password';
    # nonce: the approval challenge's; assertion: WebAuthn assertion JSON (base64url fields);
    # assertion_index / assertion_digests: this decision's place in the digest list the challenge hashed.
    method: str | None = None
    nonce: str | None = None
    assertion: str | None = None
    assertion_index: int | None = None
    assertion_digests: str | None = None
    # The Ed25519 key that signed it (migration 0008); NULL: an older, HMAC-signed decision.
    key_id: str | None = None


class Approval(SQLModel, table=True):
    """An approval that did not yet make its proposal approved (migration 0009): the first N-1 of a
    rule's ``approvals: N``, signed and proven as a decision is; the Nth is the ``decision`` row."""

    __tablename__ = "approval"
    __table_args__ = (UniqueConstraint("proposal_id", "reviewer", name="uq_approval_proposal_reviewer"),)

    id: int | None = Field(default=None, primary_key=True)
    proposal_id: str = Field(foreign_key="proposal.id")
    reviewer: str
    reason: str | None = None
    sha256: str
    path: str
    mode: str
    base_sha256: str | None = None
    decided_at: str
    signature: str
    key_id: str
    method: str
    nonce: str | None = None
    assertion: str | None = None
    assertion_index: int | None = None
    assertion_digests: str | None = None


class CommitRecord(SQLModel, table=True):
    __tablename__ = "commit_record"

    id: int | None = Field(default=None, primary_key=True)
    proposal_id: str = Field(foreign_key="proposal.id", unique=True)
    outcome: str
    observed_sha256: str | None = None
    final_path: str | None = None
    detail: str = ""
    at: str


class AuditEvent(SQLModel, table=True):
    __tablename__ = "audit_event"
    __table_args__ = (Index("ix_audit_event_proposal_kind", "proposal_id", "kind"),)

    seq: int = Field(primary_key=True)  # 1, 2, 3 ... assigned inside BEGIN IMMEDIATE
    at: str = Field(index=True)
    kind: str = Field(index=True)
    actor: str
    proposal_id: str | None = None
    payload: str  # canonical JSON object
    prev_hash: str
    hash: str


class Reviewer(SQLModel, table=True):
    __tablename__ = "reviewer"

    name: str = Field(primary_key=True)
    password_hash: str
    created_at: str
    disabled_at: str | None = None  # once set, final
    # Signed by the review side's Ed25519 key (migration 0008; ``signing.reviewer_message``).
    key_id: str | None = None
    signature: str | None = None


class ReviewSession(SQLModel, table=True):
    __tablename__ = "review_session"

    id: str = Field(primary_key=True)  # random, carried in the signed cookie
    reviewer: str = Field(foreign_key="reviewer.name", index=True)
    created_at: str
    expires_at: str
    ended_at: str | None = None


class UsedNonce(SQLModel, table=True):
    """Single-use tokens (log-in links, ...): a UNIQUE nonce makes a replay fail."""

    __tablename__ = "used_nonce"

    nonce: str = Field(primary_key=True)
    purpose: str
    used_at: str


class LoginAttempt(SQLModel, table=True):
    """The log-in throttle's counter: one row per password check, inserted before the check in the
    transaction that decides whether it may run. ``name_key`` is a keyed hash of the typed name."""

    __tablename__ = "login_attempt"
    __table_args__ = (Index("ix_login_attempt_name_key", "name_key", "started_at"),)

    id: int | None = Field(default=None, primary_key=True)
    name_key: str
    started_at: str
    outcome: str | None = None  # None while the check runs (or if it never finished), then ok/failed


class ToolDefinition(SQLModel, table=True):
    """Every distinct definition of a downstream tool ever seen (digest of its canonical JSON)."""

    __tablename__ = "tool_definition"

    server: str = Field(primary_key=True)
    tool: str = Field(primary_key=True)
    digest: str = Field(primary_key=True)
    definition: str
    first_seen_at: str
    last_seen_at: str  # the only column that changes: which definition is live now


class ToolAcceptance(SQLModel, table=True):
    """The definition a tool is pinned to: its latest row. The first sight is accepted by itself;
    a later change waits for ``gatekeeper policy check --accept-changes``."""

    __tablename__ = "tool_acceptance"

    id: int | None = Field(default=None, primary_key=True)
    server: str
    tool: str
    digest: str
    accepted_at: str
    actor: str


class Passkey(SQLModel, table=True):
    """A reviewer's WebAuthn credential. Kept after removal (decisions name it): only ``sign_count``
    grows and ``removed_at`` is set once (triggers)."""

    __tablename__ = "passkey"

    id: int | None = Field(default=None, primary_key=True)
    reviewer: str = Field(foreign_key="reviewer.name", index=True)
    credential_id: str = Field(unique=True)  # base64url, as the browser names it
    public_key: bytes  # COSE_Key, as the authenticator gave it at registration
    sign_count: int
    aaguid: str
    transports: str  # JSON list
    label: str
    created_at: str
    removed_at: str | None = None
    # Signed by the review side's Ed25519 key (migration 0008; ``signing.passkey_message``).
    key_id: str | None = None
    signature: str | None = None


class PasskeyEnrolment(SQLModel, table=True):
    """A one-time enrolment link: only the sha256 of its token is stored; ``used_at`` is set once."""

    __tablename__ = "passkey_enrolment"

    token_sha256: str = Field(primary_key=True)
    reviewer: str = Field(foreign_key="reviewer.name")
    created_at: str
    expires_at: str
    used_at: str | None = None


class ApprovalChallenge(SQLModel, table=True):
    """A nonce issued for one approval attempt of ``reviewer`` over ``digests`` (JSON list, hex)."""

    __tablename__ = "approval_challenge"

    nonce: str = Field(primary_key=True)
    reviewer: str = Field(foreign_key="reviewer.name")
    digests: str
    created_at: str
    expires_at: str
    used_at: str | None = None
