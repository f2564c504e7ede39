"""Changes to existing files: a proposal's mode and base, the decision that binds them, and the
outcomes of a change.

- ``proposal.mode``: create (every older row), replace, append, edit or delete.
- ``proposal.base`` / ``base_sha256`` / ``base_size``: the exact bytes the proxy read at the
  destination when the proposal was made (NULL for create). ``content``/``sha256``/``size`` stay
  the *result*: the whole file after the change (empty for delete).
- ``decision.mode`` / ``decision.base_sha256``: what the reviewer's page showed and posted back,
  signed. NULL on older decisions, whose signatures were made without them.
- ``commit_record.outcome`` also takes ``applied`` (a change swapped in over its base) and
  ``deleted``. SQLite cannot alter a CHECK constraint, so there the table is rebuilt: rows copied
  as they are, then its append-only triggers recreated. PostgreSQL swaps the constraint in place.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gatekeeper.store.guards import append_only, dialect

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

OUTCOMES = "'created', 'applied', 'deleted', 'conflict', 'refused', 'failed'"
MODES = "'create', 'replace', 'append', 'edit', 'delete'"


def upgrade() -> None:
    # SQLite checks a CHECK constraint given with ADD COLUMN against every row: the default passes.
    op.execute(
        f"ALTER TABLE proposal ADD COLUMN mode VARCHAR NOT NULL DEFAULT 'create' CONSTRAINT ck_proposal_mode "
        f"CHECK (mode IN ({MODES}))"
    )
    op.add_column("proposal", sa.Column("base", sa.LargeBinary, nullable=True))
    op.add_column("proposal", sa.Column("base_sha256", sa.String, nullable=True))
    op.add_column("proposal", sa.Column("base_size", sa.Integer, nullable=True))
    op.add_column("decision", sa.Column("mode", sa.String, nullable=True))
    op.add_column("decision", sa.Column("base_sha256", sa.String, nullable=True))
    if dialect(op) == "postgresql":
        op.execute(
            "ALTER TABLE commit_record DROP CONSTRAINT ck_commit_record_outcome, "
            f"ADD CONSTRAINT ck_commit_record_outcome CHECK (outcome IN ({OUTCOMES}))"
        )
        return
    op.create_table(
        "commit_record_new",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("proposal_id", sa.String(26), sa.ForeignKey("proposal.id"), nullable=False, unique=True),
        sa.Column("outcome", sa.String, nullable=False),
        sa.Column("observed_sha256", sa.String),
        sa.Column("final_path", sa.String),
        sa.Column("detail", sa.String, nullable=False, server_default=""),
        sa.Column("at", sa.String, nullable=False),
        sa.CheckConstraint(f"outcome IN ({OUTCOMES})", name="ck_commit_record_outcome"),
    )
    op.execute(
        "INSERT INTO commit_record_new (id, proposal_id, outcome, observed_sha256, final_path, detail, at) "
        "SELECT id, proposal_id, outcome, observed_sha256, final_path, detail, at FROM commit_record"
    )
    op.execute("DROP TABLE commit_record")  # its triggers go with it; DROP is not a DELETE
    op.execute("ALTER TABLE commit_record_new RENAME TO commit_record")
    append_only(op, "commit_record")


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
