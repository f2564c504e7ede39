"""Signatures no database writer can forge (Ed25519, ``gatekeeper.trust.keys``).

- ``decision.key_id``: the Ed25519 key that signed the decision (``signature`` then holds the
  Ed25519 signature, hex). NULL on older decisions, which were HMAC-signed with ``secret.key``.
- ``reviewer.key_id``/``signature`` and ``passkey.key_id``/``signature``: the row signed by the
  review side, so a password hash, enabled flag or passkey written by anything else is refused.
  A change to what is signed must carry a new signature in the same UPDATE (guard triggers).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gatekeeper.store.guards import refuse

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("decision", sa.Column("key_id", sa.String, nullable=True))
    for table in ("reviewer", "passkey"):
        op.add_column(table, sa.Column("key_id", sa.String, nullable=True))
        op.add_column(table, sa.Column("signature", sa.String, nullable=True))
    _resigned("reviewer", "NEW.password_hash IS NOT OLD.password_hash OR NEW.disabled_at IS NOT OLD.disabled_at")
    _resigned("passkey", "NEW.removed_at IS NOT OLD.removed_at")


def _resigned(table: str, changed: str) -> None:
    """An UPDATE of ``table`` that changes a signed column keeps the old signature: refused."""
    message = f"{table}: a change to a signed column needs a new signature"
    refuse(op, f"{table}_resigned", table, "UPDATE", message, when=f"({changed}) AND NEW.signature IS OLD.signature")


def downgrade() -> None:
    raise NotImplementedError("restore a backup instead")
