"""The append-only rules as triggers, in SQLite's dialect or PostgreSQL's (PL/pgSQL), for the migrations.

A rule is: refuse ``action`` (UPDATE or DELETE) on ``table``, always or ``when`` a condition on
``OLD``/``NEW`` holds, with ``message``. SQLite gets ``RAISE(ABORT, message)``; PostgreSQL gets a
row trigger that calls ``gatekeeper_refuse(message)``, which raises SQLSTATE 23000 (an integrity
violation, as SQLite's ABORT is), so the store's callers see the same class of error. On
PostgreSQL a DELETE rule also refuses TRUNCATE, which bypasses row triggers.

Conditions are written in SQLite's dialect; ``NEW.c IS NOT OLD.c`` becomes ``IS DISTINCT FROM``,
``NEW.c IS OLD.c`` ``IS NOT DISTINCT FROM``.
"""

from __future__ import annotations

from typing import Any

REFUSE_FUNCTION = """
CREATE OR REPLACE FUNCTION gatekeeper_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'integrity_constraint_violation', MESSAGE = TG_ARGV[0];
END
$$
"""


def dialect(op: Any) -> str:
    """``sqlite`` or ``postgresql``: the dialect of the connection a migration runs on."""
    return str(op.get_bind().dialect.name)


def refuse(op: Any, name: str, table: str, action: str, message: str, when: str | None = None) -> None:
    """Create trigger ``name``: ``action`` on ``table`` refused with ``message`` (``when`` it holds)."""
    if dialect(op) != "postgresql":
        condition = f"WHEN {when} " if when else ""
        op.execute(
            f"CREATE TRIGGER {name} BEFORE {action} ON {table} {condition}BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )
        return
    op.execute(REFUSE_FUNCTION)
    if when:
        when = when.replace(" IS NOT OLD.", " IS DISTINCT FROM OLD.").replace(" IS OLD.", " IS NOT DISTINCT FROM OLD.")
    condition = f"WHEN ({when}) " if when else ""
    op.execute(
        f"CREATE TRIGGER {name} BEFORE {action} ON {table} FOR EACH ROW {condition}"
        f"EXECUTE FUNCTION gatekeeper_refuse('{message}')"
    )
    if action == "DELETE":
        truncate = message.replace("DELETE", "TRUNCATE") if "DELETE" in message else f"{message} (TRUNCATE)"
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} FOR EACH STATEMENT "
            f"EXECUTE FUNCTION gatekeeper_refuse('{truncate}')"
        )


def append_only(op: Any, table: str) -> None:
    """``{table}_no_update`` and ``{table}_no_delete``: rows are only ever inserted."""
    for action in ("UPDATE", "DELETE"):
        refuse(op, f"{table}_no_{action.lower()}", table, action, f"{table} is append-only: {action} refused")
