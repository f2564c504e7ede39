"""Audit-bearing rows cannot be changed or removed, not even through a plain DB-API connection
(sqlite3, or psycopg on PostgreSQL, where TRUNCATE is refused too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatekeeper.home import Home
from gatekeeper.policy import load_policy
from gatekeeper.store.proofs import ApprovalRules
from gatekeeper.store.store import Store
from gatekeeper.store.target import PostgresUrl
from tests.helpers import PROOF, add_reviewer, draft, record_commit
from tests.passkey_support import enrol
from tests.pg_support import BACKENDS, blob, integrity_error, raw

STATEMENTS = {
    "proposal": ("UPDATE proposal SET content = {blob}", "DELETE FROM proposal"),
    "decision": ("UPDATE decision SET verdict = 'approved'", "DELETE FROM decision"),
    "approval": ("UPDATE approval SET reviewer = 'mallory'", "DELETE FROM approval"),
    "commit_record": ("UPDATE commit_record SET outcome = 'created'", "DELETE FROM commit_record"),
    "audit_event": ("UPDATE audit_event SET kind = 'x'", "DELETE FROM audit_event"),
}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


TWO_APPROVALS = """version: 1
servers:
  notes:
    command: python
    workspace: .
    tools:
      create_note: {propose: {path: {arg: path}, content: {arg: content}, approvals: 2}}
"""


@pytest.fixture
def populated(home: Home, store: Store, tmp_path: Path) -> Home:
    add_reviewer(store)
    p = store.propose(draft())
    store.decide(p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path="notes/a.md", proof=PROOF)
    record_commit(store, p.id, "conflict", detail="test")
    (tmp_path / "two.yaml").write_text(TWO_APPROVALS)
    two = ApprovalRules(policy=load_policy(str(tmp_path / "two.yaml")))
    q = store.propose(draft("notes/b.md"))  # one approval of two: an approval row
    store.decide(q.id, verdict="approved", reviewer="alice", sha256=q.sha256, path="notes/b.md", proof=PROOF, rules=two)
    return home


@pytest.mark.parametrize("table", sorted(STATEMENTS))
@pytest.mark.parametrize("which", ["UPDATE", "DELETE"])
def test_update_and_delete_are_refused(populated: Home, table: str, which: str) -> None:
    sql = STATEMENTS[table][0 if which == "UPDATE" else 1].format(blob=blob(populated, "00"))
    conn = raw(populated)
    before = conn.execute(f"SELECT * FROM {table}").fetchall()
    assert before, "the fixture must have put a row there, else the trigger would not fire"
    with pytest.raises(integrity_error(populated), match="append-only"):
        conn.execute(sql)
    conn.rollback()
    assert conn.execute(f"SELECT * FROM {table}").fetchall() == before


@pytest.mark.parametrize("backend", ["postgres"])  # SQLite has no TRUNCATE: its DELETE fires the row triggers
def test_truncate_is_refused_on_postgres(populated: Home) -> None:
    """TRUNCATE skips row triggers: every table whose rows are kept refuses it by a statement trigger."""
    assert isinstance(populated.database, PostgresUrl)
    conn = raw(populated)
    tables = ("proposal", "decision", "approval", "commit_record", "audit_event", "reviewer", "used_nonce", "passkey")
    for table in tables:
        with pytest.raises(integrity_error(populated), match=r"refused|kept"):
            conn.execute(f"TRUNCATE {table} CASCADE")
    assert conn.execute("SELECT count(*) FROM audit_event").fetchone()[0] > 0


def test_reviewers_are_never_deleted_and_a_disable_is_final(populated: Home, store: Store) -> None:
    conn, refused = raw(populated), integrity_error(populated)
    with pytest.raises(refused, match="disable instead"):
        conn.execute("DELETE FROM reviewer")
    with pytest.raises(refused, match="final"):
        conn.execute("UPDATE reviewer SET name = 'mallory'")
    conn.rollback()
    store.disable_reviewer("alice")
    with pytest.raises(refused, match="final"):
        conn.execute("UPDATE reviewer SET disabled_at = NULL, signature = 'new'")


def test_a_signed_reviewer_or_passkey_column_changes_only_with_a_new_signature(populated: Home) -> None:
    """Guard triggers (migration 0008): the naive write, a new password hash under the old signature, fails."""
    conn, refused = raw(populated), integrity_error(populated)
    with pytest.raises(refused, match="needs a new signature"):
        conn.execute("UPDATE reviewer SET password_hash = 'x'")
    conn.rollback()  # PostgreSQL: a refused statement ends the transaction
    with pytest.raises(refused, match="needs a new signature"):
        conn.execute("UPDATE reviewer SET disabled_at = '2026-01-01T00:00:00.000000Z'")


def test_passkey_rows_only_move_forward(populated: Home, store: Store) -> None:
    """passkey: only sign_count grows and removed_at is set once; enrolment links and approval
    challenges: only used_at is set, once; none of them is ever deleted (migration 0007)."""
    auth = enrol(store)
    p = store.propose(draft("notes/b.md", b"b\n"))
    store.issue_challenge("alice", [p.id])
    conn, error = raw(populated), integrity_error(populated)
    refused = [
        "DELETE FROM passkey",
        "DELETE FROM passkey_enrolment",
        "DELETE FROM approval_challenge",
        f"UPDATE passkey SET public_key = {blob(populated, '00')}",
        "UPDATE passkey SET reviewer = 'bob'",
        "UPDATE passkey SET sign_count = -1",
        "UPDATE passkey_enrolment SET expires_at = '9999'",
        "UPDATE approval_challenge SET digests = '[]'",
        "UPDATE approval_challenge SET reviewer = 'bob'",
    ]
    for sql in refused:
        with pytest.raises(error, match=r"refused|only"):
            conn.execute(sql)
    conn.execute("UPDATE passkey SET sign_count = sign_count + 1")  # forward: allowed
    conn.execute("UPDATE approval_challenge SET used_at = 't1'")
    conn.commit()
    for sql in ("UPDATE approval_challenge SET used_at = NULL", "UPDATE passkey_enrolment SET used_at = 't2'"):
        with pytest.raises(error, match="only used_at"):
            conn.execute(sql)
    conn.rollback()  # release the write lock the refused statements' transaction holds
    store.remove_passkey("alice", auth.credential_b64)
    with pytest.raises(error, match="removed_at"):
        conn.execute("UPDATE passkey SET removed_at = NULL, signature = 'new'")
    conn.close()
