"""Log-in attempts: the throttle's counter, written before a password is checked.

Counting past failures from the audit log let 30 parallel wrong passwords through 12 to 30
argon2 checks: each request counted, then checked, then recorded. A row here is inserted in the
same BEGIN IMMEDIATE transaction that counts the name's recent attempts, so at most
``MAX_FAILURES`` checks can be in flight or failed per name and window. The name is kept only
as a keyed hash (it may be a password typed into the wrong field); rows older than the window
are deleted, so the table is not append-only and stays small.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "login_attempt",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name_key", sa.String, nullable=False),
        sa.Column("started_at", sa.String, nullable=False),
        sa.Column("outcome", sa.String),
        sa.CheckConstraint("outcome IS NULL OR outcome IN ('ok', 'failed')", name="ck_login_attempt_outcome"),
    )
    op.create_index("ix_login_attempt_name_key", "login_attempt", ["name_key", "started_at"])


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
