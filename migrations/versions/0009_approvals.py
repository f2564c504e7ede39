"""Approvals by several reviewers (a rule's ``approvals: N``, issue 15).

- ``approval``: an approval that did not yet make its proposal approved (the first N-1 of N), signed
  and proven exactly as a decision is (the same signed message, with verdict 'approved'). The Nth
  approval is the ``decision`` row, as with one approval. UNIQUE(proposal_id, reviewer): one
  reviewer counts once. Append-only, like ``decision``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gatekeeper.store.guards import append_only

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approval",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("proposal_id", sa.String, sa.ForeignKey("proposal.id"), nullable=False),
        sa.Column("reviewer", sa.String, nullable=False),
        sa.Column("reason", sa.String),
        sa.Column("sha256", sa.String, nullable=False),
        sa.Column("path", sa.String, nullable=False),
        sa.Column("mode", sa.String, nullable=False),
        sa.Column("base_sha256", sa.String),
        sa.Column("decided_at", sa.String, nullable=False),
        sa.Column("signature", sa.String, nullable=False),
        sa.Column("key_id", sa.String, nullable=False),
        sa.Column("method", sa.String, nullable=False),
        sa.Column("nonce", sa.String),
        sa.Column("assertion", sa.String),
        sa.Column("assertion_index", sa.Integer),
        sa.Column("assertion_digests", sa.String),
        sa.UniqueConstraint("proposal_id", "reviewer", name="uq_approval_proposal_reviewer"),
    )
    append_only(op, "approval")


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
