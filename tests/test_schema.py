"""The schema a blank database ends with, the version gate, and migrations that fail."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from gatekeeper.errors import SchemaTooNew, SchemaTooOld
from gatekeeper.home import Home
from gatekeeper.resources import migrations_dir
from gatekeeper.store import events as ev
from gatekeeper.store import migrate
from gatekeeper.store.schema import SQLModel
from gatekeeper.store.store import Store
from gatekeeper.store.target import PostgresUrl
from gatekeeper.store.version import HEAD_REVISION, KNOWN_REVISIONS
from tests.pg_support import BACKENDS, raw

EXPECTED_COLUMNS = {
    "proposal": [
        "id",
        "created_at",
        "server",
        "tool",
        "arguments",
        "args_sha256",
        "workspace",
        "path",
        "content",
        "sha256",
        "size",
        "encoding",
        "client_name",
        "client_version",
        "protocol_version",
        "session_id",
        "policy_digest",
        "expires_at",
        "workspace_real",
        "mode",
        "base",
        "base_sha256",
        "base_size",
    ],
    "decision": [
        "id",
        "proposal_id",
        "verdict",
        "reviewer",
        "reason",
        "sha256",
        "path",
        "decided_at",
        "signature",
        "mode",
        "base_sha256",
        "method",
        "nonce",
        "assertion",
        "assertion_index",
        "assertion_digests",
        "key_id",
    ],
    "commit_record": ["id", "proposal_id", "outcome", "observed_sha256", "final_path", "detail", "at"],
    "audit_event": ["seq", "at", "kind", "actor", "proposal_id", "payload", "prev_hash", "hash"],
    "reviewer": ["name", "password_hash", "created_at", "disabled_at", "key_id", "signature"],
    "review_session": ["id", "reviewer", "created_at", "expires_at", "ended_at"],
    "used_nonce": ["nonce", "purpose", "used_at"],
    "alembic_version": ["version_num"],
    "tool_definition": ["server", "tool", "digest", "definition", "first_seen_at", "last_seen_at"],
    "tool_acceptance": ["id", "server", "tool", "digest", "accepted_at", "actor"],
    "login_attempt": ["id", "name_key", "started_at", "outcome"],
    "passkey": [
        "id",
        "reviewer",
        "credential_id",
        "public_key",
        "sign_count",
        "aaguid",
        "transports",
        "label",
        "created_at",
        "removed_at",
        "key_id",
        "signature",
    ],
    "passkey_enrolment": ["token_sha256", "reviewer", "created_at", "expires_at", "used_at"],
    "approval_challenge": ["nonce", "reviewer", "digests", "created_at", "expires_at", "used_at"],
    "approval": [
        "id",
        "proposal_id",
        "reviewer",
        "reason",
        "sha256",
        "path",
        "mode",
        "base_sha256",
        "decided_at",
        "signature",
        "key_id",
        "method",
        "nonce",
        "assertion",
        "assertion_index",
        "assertion_digests",
    ],
}
EXPECTED_INDEXES = {
    "ix_proposal_created_at",
    "ix_proposal_expires_at",
    "ix_proposal_path",
    "ix_proposal_retry",
    "ix_audit_event_at",
    "ix_audit_event_kind",
    "ix_audit_event_proposal_kind",
    "ix_review_session_reviewer",
    "ix_tool_acceptance_tool",
    "ix_login_attempt_name_key",
    "ix_passkey_reviewer",
}
EXPECTED_TRIGGERS = (
    {
        f"{t}_no_{a}"
        for t in ("proposal", "decision", "approval", "commit_record", "audit_event", "tool_acceptance")
        for a in ("update", "delete")
    }
    | {
        "reviewer_no_delete",
        "reviewer_fixed",
        "used_nonce_no_change",
        "used_nonce_no_delete",
        "tool_definition_fixed",
        "tool_definition_no_delete",
    }
    | {
        f"{t}_{w}"
        for t in ("passkey", "passkey_enrolment", "approval_challenge")
        for w in ("no_delete", "forward_only")
    }
    | {"reviewer_resigned", "passkey_resigned"}
)


def _names(conn: sqlite3.Connection, kind: str) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = ? AND name NOT LIKE 'sqlite_%'", (kind,))
    return {r[0] for r in rows}


# On PostgreSQL every table whose DELETE is refused also refuses TRUNCATE (it skips row triggers).
TRUNCATE_TRIGGERS = {f"{t[: -len('_no_delete')]}_no_truncate" for t in EXPECTED_TRIGGERS if t.endswith("_no_delete")}


def _columns(conn: object, home: Home, table: str) -> list[str]:
    if isinstance(home.database, PostgresUrl):
        sql = "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position"
        return [r[0] for r in conn.execute(sql, (table,))]  # type: ignore[attr-defined]
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]  # type: ignore[attr-defined]


def _postgres_schema(conn: object) -> tuple[set[str], set[str], set[str], dict[str, list[str]]]:
    """Tables, indexes (not primary keys or UNIQUE constraints), triggers, and each UNIQUE's table."""
    q = conn.execute  # type: ignore[attr-defined]
    tables = {r[0] for r in q("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")}
    indexes, uniques = set(), {}
    for name, table, primary, unique, columns in q(
        "SELECT i.relname, t.relname, x.indisprimary, x.indisunique, pg_get_indexdef(x.indexrelid) "
        "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
        "JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = 'public'"
    ):
        if unique and not primary:  # a UNIQUE constraint's index (SQLite's sqlite_autoindex_*)
            uniques.setdefault(table, []).append(columns.rsplit("(", 1)[1].rstrip(")"))
        elif not primary:
            indexes.add(name)
    triggers = {r[0] for r in q("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")}
    return tables, indexes, triggers, uniques


@pytest.mark.parametrize("backend", BACKENDS)
def test_blank_database_has_exactly_the_expected_schema(home: Home) -> None:
    conn = raw(home)
    for table, columns in EXPECTED_COLUMNS.items():
        assert _columns(conn, home, table) == columns, table
    assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD_REVISION,)
    if isinstance(home.database, PostgresUrl):
        tables, indexes, triggers, uniques = _postgres_schema(conn)
        assert (tables, indexes) == (set(EXPECTED_COLUMNS), EXPECTED_INDEXES)
        assert triggers == EXPECTED_TRIGGERS | TRUNCATE_TRIGGERS
        assert uniques == {
            "decision": ["proposal_id"],
            "commit_record": ["proposal_id"],
            "passkey": ["credential_id"],
            "approval": ["proposal_id, reviewer"],
        }
        assert conn.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'proposal' AND column_name = 'content'"
        ).fetchone() == ("bytea",)
        # 0010: the tables the proposal listings read get no parallel plans (tests/test_postgres_plans.py)
        options = conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.reloptions IS NOT NULL"
        ).fetchall()
        assert dict(options) == {t: ["parallel_workers=0"] for t in ("proposal", "decision", "commit_record")}
        return
    assert _names(conn, "table") == set(EXPECTED_COLUMNS)
    assert _names(conn, "index") == EXPECTED_INDEXES
    assert _names(conn, "trigger") == EXPECTED_TRIGGERS
    # UNIQUE(proposal_id) on decision and commit_record: one decision, one outcome per proposal.
    for table in ("decision", "commit_record"):
        uniques = [r for r in conn.execute(f"PRAGMA index_list({table})") if r[2] == 1]
        cols = [conn.execute(f"PRAGMA index_info({u[1]})").fetchone()[2] for u in uniques]
        assert cols == ["proposal_id"], table
    # UNIQUE(proposal_id, reviewer) on approval: one reviewer counts once.
    (unique,) = [r for r in conn.execute("PRAGMA index_list(approval)") if r[2] == 1]
    assert [r[2] for r in conn.execute(f"PRAGMA index_info({unique[1]})")] == ["proposal_id", "reviewer"]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("backend", BACKENDS)
def test_models_mirror_the_migrated_schema(home: Home) -> None:
    """SQLModel classes and migrations must not drift apart."""
    conn = raw(home)
    for name, table in SQLModel.metadata.tables.items():
        assert [c.name for c in table.columns] == EXPECTED_COLUMNS[name], name
        assert _columns(conn, home, name) == EXPECTED_COLUMNS[name]
    assert set(SQLModel.metadata.tables) == set(EXPECTED_COLUMNS) - {"alembic_version"}


def test_known_revisions_match_the_migration_scripts() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    revisions = [r.revision for r in ScriptDirectory.from_config(cfg).walk_revisions()]
    assert tuple(reversed(revisions)) == KNOWN_REVISIONS


def test_pragmas_on_every_connection(store: Store) -> None:
    with store.writer.connection() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("backend", BACKENDS)
def test_newer_schema_is_refused(home: Home) -> None:
    conn = raw(home)
    conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.commit()
    with pytest.raises(SchemaTooNew, match=r"9999.*newer than this Gatekeeper"):
        Store(home.database)
    with pytest.raises(SchemaTooNew):
        migrate.status(home.database)


def test_blank_database_says_to_upgrade(tmp_path: Path) -> None:
    db = tmp_path / "gatekeeper.db"
    sqlite3.connect(db).close()
    with pytest.raises(SchemaTooOld) as err:
        Store(db)
    assert "gatekeeper db upgrade" in str(err.value)


def test_older_schema_says_to_upgrade(tmp_path: Path) -> None:
    """A database at an older revision than the code: simulated with a migrations copy that adds one."""
    migrations = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), migrations, ignore=shutil.ignore_patterns("__pycache__"))
    (migrations / "versions" / "9001_extra.py").write_text(
        f'revision = "9001"\ndown_revision = "{HEAD_REVISION}"\nbranch_labels = None\ndepends_on = None\n'
        "from alembic import op\n\n\ndef upgrade():\n    op.execute('CREATE TABLE extra (x INTEGER)')\n"
    )
    db = tmp_path / "gatekeeper.db"
    migrate.upgrade(db)  # the shipped migrations: at HEAD_REVISION
    st = migrate.status(db, migrations)
    assert (st.current, st.head, st.pending) == (HEAD_REVISION, "9001", ("9001",))
    migrate.upgrade(db, migrations)
    assert migrate.status(db, migrations).up_to_date
    assert sqlite3.connect(db).execute("SELECT count(*) FROM extra").fetchone() == (0,)


def test_failing_migration_rolls_back_whole(tmp_path: Path) -> None:
    """A revision that fails half-way leaves no table of its own and the version unchanged."""
    migrations = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), migrations, ignore=shutil.ignore_patterns("__pycache__"))
    (migrations / "versions" / "9001_broken.py").write_text(
        f'revision = "9001"\ndown_revision = "{HEAD_REVISION}"\nbranch_labels = None\ndepends_on = None\n'
        "from alembic import op\n\n\ndef upgrade():\n"
        "    op.execute('CREATE TABLE half_done (x INTEGER)')\n"
        "    op.execute('INSERT INTO no_such_table VALUES (1)')\n"
    )
    db = tmp_path / "gatekeeper.db"
    migrate.upgrade(db)
    with pytest.raises(Exception, match="no_such_table"):
        migrate.upgrade(db, migrations)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD_REVISION,)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchone() is None


def test_upgrade_from_0003_keeps_proposals_and_leaves_their_real_workspace_unknown(tmp_path: Path) -> None:
    """0004 adds proposal.workspace_real: rows made before it get NULL (the committer then expects
    the recorded workspace itself to be the real path), and the table stays append-only."""
    migrations = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), migrations, ignore=shutil.ignore_patterns("__pycache__"))
    for script in (migrations / "versions").glob("*.py"):
        if script.name[:4] > "0003":  # back to the last revision before 0004
            script.unlink()
    db = tmp_path / "gatekeeper.db"
    migrate.upgrade(db, migrations)
    conn = sqlite3.connect(db)
    conn.execute(
        "INSERT INTO proposal (id, created_at, server, tool, arguments, args_sha256, workspace, path, content, "
        "sha256, size, encoding, policy_digest, expires_at) VALUES ('01OLD', 't', 's', 't', '{}', 'a', '/ws', "
        "'a.md', x'00', 'h', 1, 'text', 'p', 'e')"
    )
    conn.commit()
    conn.close()
    migrate.upgrade(db)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD_REVISION,)
    assert conn.execute("SELECT id, workspace, workspace_real FROM proposal").fetchall() == [("01OLD", "/ws", None)]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE proposal SET workspace_real = '/elsewhere'")


def test_writer_pool_keeps_one_connection_and_never_hands_one_on_mid_transaction(store: Store) -> None:
    pool = store.writer
    with pool.connection() as first, pool.connection() as second:  # two users at once: two connections
        assert first is not second
    with pool.connection() as kept:
        assert kept is second  # the first one returned is kept open; the other was closed
        kept.execute("BEGIN IMMEDIATE")  # left open, as a COMMIT that failed would leave it
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    with pool.connection() as again:
        assert again is kept and not again.in_transaction  # rolled back before it was handed on
    store.append_event(ev.INIT, "test")  # and the write lock was released: a write goes through
