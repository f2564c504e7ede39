"""PostgreSQL: no parallel plans on the tables the proposal listings read (proposal, decision,
commit_record), by the storage parameter ``parallel_workers = 0``. SQLite: nothing to do.

``audit proposals --status pending`` (and the review page's queue, the same ``Reader.proposals``)
is a LIMIT 50 walk down ``ix_proposal_created_at`` with index probes into decision and
commit_record: ~1 ms of work at 1,000,000 events. Once the table is big, the planner ran it as a
Gather Merge of parallel workers, and starting them cost 15-80 ms (p50 15.6-34 ms, 1-2 ms
without; bench/team_bench.py T4). Every listing is such a lookup; none needs a parallel scan.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from gatekeeper.store.guards import dialect

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

LISTING_TABLES = ("proposal", "decision", "commit_record")


def upgrade() -> None:
    if dialect(op) == "postgresql":
        for table in LISTING_TABLES:
            op.execute(f"ALTER TABLE {table} SET (parallel_workers = 0)")


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
