"""Index audit events by (proposal_id, kind).

Lookups such as "has this proposal a commit_intent event" filter on both columns; with only
single-column indexes SQLite chose ix_audit_event_kind and scanned every event of that kind
ever written (the committer's intent transaction grew from 3 to 13 ms over 1,000 commits).
The composite index also serves proposal_id alone, so the single-column one goes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_audit_event_proposal_kind", "audit_event", ["proposal_id", "kind"])
    op.drop_index("ix_audit_event_proposal_id", table_name="audit_event")


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
