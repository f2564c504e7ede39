"""Approval challenges may be deleted once expired: the store prunes them as it issues new ones.

``approval_challenge`` holds the single-use nonces approvals answer (0007). Its rows were kept
forever, and a session alone (a stolen cookie and the page's CSRF token) could add them as fast as
it liked: 260 rows and ~2.7 MB in a few seconds (issue 24). They are not audit rows: a decision
carries its own nonce, assertion and digests, and nothing reads an expired challenge again (an
approval that answers a pruned one is refused as "not issued here", as it was refused as
"expired" or "already used" before). So DELETE is now refused only for a row that has not expired
by the database's own clock; TRUNCATE stays refused, and UPDATE keeps 0007's rule (only
``used_at``, once).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

from gatekeeper.store.guards import dialect, refuse

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TABLE = "approval_challenge"
# The current time as format_ts writes it (text order is time order), in each dialect.
SQLITE_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
POSTGRES_NOW = """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""


def upgrade() -> None:
    if dialect(op) == "postgresql":
        op.execute(f"DROP TRIGGER {TABLE}_no_delete ON {TABLE}")
        op.execute(f"DROP TRIGGER {TABLE}_no_truncate ON {TABLE}")  # made again by refuse() below
        now = POSTGRES_NOW
    else:
        op.execute(f"DROP TRIGGER {TABLE}_no_delete")
        now = SQLITE_NOW
    message = f"{TABLE}: a challenge is kept until it expires: DELETE refused"
    refuse(op, f"{TABLE}_no_delete", TABLE, "DELETE", message, when=f"OLD.expires_at > {now}")


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
