"""Initial schema: the append-only tables, their triggers, reviewers, sessions and nonces.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gatekeeper.store.guards import append_only, refuse

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

APPEND_ONLY = ("proposal", "decision", "commit_record", "audit_event")


def upgrade() -> None:
    op.create_table(
        "proposal",
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("created_at", sa.String, nullable=False),
        sa.Column("server", sa.String, nullable=False),
        sa.Column("tool", sa.String, nullable=False),
        sa.Column("arguments", sa.String, nullable=False),
        sa.Column("args_sha256", sa.String, nullable=False),
        sa.Column("workspace", sa.String, nullable=False),
        sa.Column("path", sa.String, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("sha256", sa.String, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("encoding", sa.String, nullable=False, server_default="text"),
        sa.Column("client_name", sa.String),
        sa.Column("client_version", sa.String),
        sa.Column("protocol_version", sa.String),
        sa.Column("session_id", sa.String),
        sa.Column("policy_digest", sa.String, nullable=False),
        sa.Column("expires_at", sa.String, nullable=False),
        sa.CheckConstraint("size = length(content)", name="ck_proposal_size"),
        sa.CheckConstraint("encoding IN ('text', 'base64')", name="ck_proposal_encoding"),
    )
    op.create_index("ix_proposal_created_at", "proposal", ["created_at"])
    op.create_index("ix_proposal_expires_at", "proposal", ["expires_at"])
    op.create_index("ix_proposal_path", "proposal", ["path"])
    op.create_index("ix_proposal_retry", "proposal", ["server", "tool", "args_sha256"])

    op.create_table(
        "decision",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("proposal_id", sa.String(26), sa.ForeignKey("proposal.id"), nullable=False, unique=True),
        sa.Column("verdict", sa.String, nullable=False),
        sa.Column("reviewer", sa.String, nullable=False),
        sa.Column("reason", sa.String),
        sa.Column("sha256", sa.String, nullable=False),
        sa.Column("path", sa.String, nullable=False),
        sa.Column("decided_at", sa.String, nullable=False),
        sa.Column("signature", sa.String, nullable=False),
        sa.CheckConstraint("verdict IN ('approved', 'rejected')", name="ck_decision_verdict"),
    )

    op.create_table(
        "commit_record",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("proposal_id", sa.String(26), sa.ForeignKey("proposal.id"), nullable=False, unique=True),
        sa.Column("outcome", sa.String, nullable=False),
        sa.Column("observed_sha256", sa.String),
        sa.Column("final_path", sa.String),
        sa.Column("detail", sa.String, nullable=False, server_default=""),
        sa.Column("at", sa.String, nullable=False),
        sa.CheckConstraint("outcome IN ('created', 'conflict', 'refused', 'failed')", name="ck_commit_record_outcome"),
    )

    op.create_table(
        "audit_event",
        # 64-bit on PostgreSQL (SQLite's INTEGER already is, and must stay INTEGER to be the rowid).
        sa.Column(
            "seq", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), primary_key=True, autoincrement=False
        ),
        sa.Column("at", sa.String, nullable=False),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("actor", sa.String, nullable=False),
        sa.Column("proposal_id", sa.String(26)),
        sa.Column("payload", sa.String, nullable=False),
        sa.Column("prev_hash", sa.String, nullable=False),
        sa.Column("hash", sa.String, nullable=False),
    )
    op.create_index("ix_audit_event_at", "audit_event", ["at"])
    op.create_index("ix_audit_event_kind", "audit_event", ["kind"])
    op.create_index("ix_audit_event_proposal_id", "audit_event", ["proposal_id"])

    op.create_table(
        "reviewer",
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("password_hash", sa.String, nullable=False),
        sa.Column("created_at", sa.String, nullable=False),
        sa.Column("disabled_at", sa.String),
    )

    op.create_table(
        "review_session",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("reviewer", sa.String, sa.ForeignKey("reviewer.name"), nullable=False),
        sa.Column("created_at", sa.String, nullable=False),
        sa.Column("expires_at", sa.String, nullable=False),
        sa.Column("ended_at", sa.String),
    )
    op.create_index("ix_review_session_reviewer", "review_session", ["reviewer"])

    op.create_table(
        "used_nonce",
        sa.Column("nonce", sa.String, primary_key=True),
        sa.Column("purpose", sa.String, nullable=False),
        sa.Column("used_at", sa.String, nullable=False),
    )

    for table in APPEND_ONLY:
        append_only(op, table)
    # Reviewers are never deleted (decisions name them), names and creation times never change,
    # and a disabled reviewer stays disabled.
    refuse(op, "reviewer_no_delete", "reviewer", "DELETE", "reviewer rows are kept: disable instead of deleting")
    refuse(
        op,
        "reviewer_fixed",
        "reviewer",
        "UPDATE",
        "reviewer: name, created_at and a disable are final",
        when="NEW.name IS NOT OLD.name OR NEW.created_at IS NOT OLD.created_at "
        "OR (OLD.disabled_at IS NOT NULL AND NEW.disabled_at IS NOT OLD.disabled_at)",
    )
    refuse(op, "used_nonce_no_change", "used_nonce", "UPDATE", "used_nonce is append-only: UPDATE refused")
    refuse(op, "used_nonce_no_delete", "used_nonce", "DELETE", "used_nonce is append-only: DELETE refused")


def downgrade() -> None:
    raise NotImplementedError("Gatekeeper's audit tables are append-only; restore a backup instead")
