"""Tool definition pins: every downstream tool definition seen, and which one a person accepted.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gatekeeper.store.guards import append_only, refuse

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_definition",
        sa.Column("server", sa.String, primary_key=True),
        sa.Column("tool", sa.String, primary_key=True),
        sa.Column("digest", sa.String, primary_key=True),
        sa.Column("definition", sa.String, nullable=False),
        sa.Column("first_seen_at", sa.String, nullable=False),
        sa.Column("last_seen_at", sa.String, nullable=False),
    )
    op.create_table(
        "tool_acceptance",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("server", sa.String, nullable=False),
        sa.Column("tool", sa.String, nullable=False),
        sa.Column("digest", sa.String, nullable=False),
        sa.Column("accepted_at", sa.String, nullable=False),
        sa.Column("actor", sa.String, nullable=False),
    )
    op.create_index("ix_tool_acceptance_tool", "tool_acceptance", ["server", "tool", "id"])
    # A definition row is permanent; only its last_seen_at moves (it says which one is live now).
    refuse(
        op,
        "tool_definition_fixed",
        "tool_definition",
        "UPDATE",
        "tool_definition: only last_seen_at may change",
        when="NEW.server IS NOT OLD.server OR NEW.tool IS NOT OLD.tool OR NEW.digest IS NOT OLD.digest "
        "OR NEW.definition IS NOT OLD.definition OR NEW.first_seen_at IS NOT OLD.first_seen_at",
    )
    refuse(
        op, "tool_definition_no_delete", "tool_definition", "DELETE", "tool_definition is append-only: DELETE refused"
    )
    append_only(op, "tool_acceptance")


def downgrade() -> None:
    raise NotImplementedError("Gatekeeper's audit tables are append-only; restore a backup instead")
