"""Approvals the reviewer signs: passkeys (WebAuthn), enrolment links, approval challenges, and the
proof each approval carries.

- ``decision.method``: 'passkey' or 'password' (the password re-entered for this approval); NULL on
  older decisions. ``nonce``: the server's single-use challenge nonce the approval answered.
  ``assertion``: the WebAuthn assertion as JSON (base64url fields); ``assertion_index`` and
  ``assertion_digests``: this decision's place in the list of decision digests (hex, JSON) whose
  batch hash was the challenge. Added columns: the table keeps its append-only triggers.
- ``passkey``: a reviewer's credential (COSE public key). Only ``sign_count`` may grow and
  ``removed_at`` be set once; rows are never deleted (decisions name their credential).
- ``passkey_enrolment``: one-time enrolment links, by the sha256 of the token (the token itself is
  never stored). ``approval_challenge``: nonces issued per approval attempt. In both only
  ``used_at`` may be set, once; rows are never deleted.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gatekeeper.store.guards import refuse

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE decision ADD COLUMN method VARCHAR CONSTRAINT ck_decision_method "
        "CHECK (method IN ('passkey', 'password'))"
    )
    op.add_column("decision", sa.Column("nonce", sa.String, nullable=True))
    op.add_column("decision", sa.Column("assertion", sa.String, nullable=True))
    op.add_column("decision", sa.Column("assertion_index", sa.Integer, nullable=True))
    op.add_column("decision", sa.Column("assertion_digests", sa.String, nullable=True))

    op.create_table(
        "passkey",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("reviewer", sa.String, sa.ForeignKey("reviewer.name"), nullable=False),
        sa.Column("credential_id", sa.String, nullable=False, unique=True),
        sa.Column("public_key", sa.LargeBinary, nullable=False),
        sa.Column("sign_count", sa.Integer, nullable=False),
        sa.Column("aaguid", sa.String, nullable=False),
        sa.Column("transports", sa.String, nullable=False),
        sa.Column("label", sa.String, nullable=False),
        sa.Column("created_at", sa.String, nullable=False),
        sa.Column("removed_at", sa.String),
    )
    op.create_index("ix_passkey_reviewer", "passkey", ["reviewer"])
    op.create_table(
        "passkey_enrolment",
        sa.Column("token_sha256", sa.String, primary_key=True),
        sa.Column("reviewer", sa.String, sa.ForeignKey("reviewer.name"), nullable=False),
        sa.Column("created_at", sa.String, nullable=False),
        sa.Column("expires_at", sa.String, nullable=False),
        sa.Column("used_at", sa.String),
    )
    op.create_table(
        "approval_challenge",
        sa.Column("nonce", sa.String, primary_key=True),
        sa.Column("reviewer", sa.String, sa.ForeignKey("reviewer.name"), nullable=False),
        sa.Column("digests", sa.String, nullable=False),
        sa.Column("created_at", sa.String, nullable=False),
        sa.Column("expires_at", sa.String, nullable=False),
        sa.Column("used_at", sa.String),
    )
    fixed = "id", "reviewer", "credential_id", "public_key", "aaguid", "transports", "label", "created_at"
    _forward_only(
        "passkey",
        fixed,
        "NEW.sign_count < OLD.sign_count OR (OLD.removed_at IS NOT NULL AND NEW.removed_at IS NOT OLD.removed_at)",
        "passkey: only sign_count may grow and removed_at be set once",
    )
    once = "token_sha256", "reviewer", "created_at", "expires_at"
    for table, columns in (("passkey_enrolment", once), ("approval_challenge", ("nonce", *once[1:], "digests"))):
        _forward_only(
            table,
            columns,
            "(OLD.used_at IS NOT NULL AND NEW.used_at IS NOT OLD.used_at)",
            f"{table}: only used_at may be set, once",
        )


def _forward_only(table: str, fixed: tuple[str, ...], moved_back: str, message: str) -> None:
    """Rows of ``table`` are never deleted; ``fixed`` columns never change; ``moved_back`` is refused."""
    changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in fixed)
    refuse(op, f"{table}_no_delete", table, "DELETE", f"{table} rows are kept: DELETE refused")
    refuse(op, f"{table}_forward_only", table, "UPDATE", message, when=f"{changed} OR {moved_back}")


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
