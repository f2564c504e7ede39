"""Tool definition pins: every downstream tool definition seen, and which one a person accepted.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

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
    op.execute(
        "CREATE TRIGGER tool_definition_fixed BEFORE UPDATE ON tool_definition "
        "WHEN NEW.server IS NOT OLD.server OR NEW.tool IS NOT OLD.tool OR NEW.digest IS NOT OLD.digest "
        "OR NEW.definition IS NOT OLD.definition OR NEW.first_seen_at IS NOT OLD.first_seen_at "
        "BEGIN SELECT RAISE(ABORT, 'tool_definition: only last_seen_at may change'); END"
    )
    op.execute(
        "CREATE TRIGGER tool_definition_no_delete BEFORE DELETE ON tool_definition "
        "BEGIN SELECT RAISE(ABORT, 'tool_definition is append-only: DELETE refused'); END"
    )
    for table in ("tool_acceptance",):
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: {action} refused'); END"
            )


def downgrade() -> None:
    raise NotImplementedError("Gatekeeper's audit tables are append-only; restore a backup instead")
