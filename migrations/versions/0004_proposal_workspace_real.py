"""Record where the workspace root really was when a proposal was made.

``workspace_real`` is the root's resolved real path at proposal time. The committer refuses a
proposal whose root now resolves elsewhere (the root swapped for a symlink after approval would
otherwise receive the file in the link's target). Rows from before this revision keep NULL; for
them the committer expects the recorded ``workspace`` itself to be the real path.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("proposal", sa.Column("workspace_real", sa.String, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
