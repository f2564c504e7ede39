"""Replay of an older, validly signed reviewer or passkey row by someone who can write the database
but holds no key: the row was signed by the review side once, but a later change (a new password,
disabling, removing a passkey) is on the chain, so log-in and approval refuse it with a
``reviewer_row_refused`` event. Log-in goes through the review app over HTTP."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from gatekeeper.canonical import now_ts
from gatekeeper.errors import Conflict
from gatekeeper.home import Home, ensure_keys
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.store import Store
from gatekeeper.trust.approval import ApprovalRefused
from tests.helpers import TEST_HASH, TEST_PASSWORD, draft
from tests.passkey_support import approve, enrol, sign
from tests.review_support import PASSWORD, Page, decisions, event_count, hashed, review_app


def saved_row(db: Path, table: str, key: str, value: str, *columns: str) -> dict[str, object]:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {key} = ?", (value,)).fetchone()
    finally:
        conn.close()
    return dict(zip(columns, row, strict=True))


def put_back(db: Path, table: str, key: str, value: str, saved: dict[str, object], *triggers: str) -> None:
    """Write the saved (validly signed) columns back, as a database writer can, the named guard
    triggers dropped first (the signature check's trigger does not object: it changes too)."""
    conn = sqlite3.connect(db)
    try:
        with conn:
            for name in triggers:
                conn.execute(f"DROP TRIGGER {name}")
            sets = ", ".join(f"{c} = :{c}" for c in saved)
            conn.execute(f"UPDATE {table} SET {sets} WHERE {key} = :key_value", {**saved, "key_value": value})
    finally:
        conn.close()


def refusals(home: Home) -> list[str]:
    conn = sqlite3.connect(home.db_path)
    try:
        rows = conn.execute("SELECT payload FROM audit_event WHERE kind = 'reviewer_row_refused' ORDER BY seq")
        return [r[0] for r in rows]
    finally:
        conn.close()


def login_refused(home: Home, password: str) -> None:
    with review_app(home) as site:
        assert Page(site).login("alice", password).status_code != 303


REVIEWER = ("password_hash", "disabled_at", "key_id", "signature")


def test_an_old_password_hash_put_back_after_a_password_change_neither_logs_in_nor_approves(home: Home) -> None:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        p = store.propose(draft())
    old = saved_row(home.db_path, "reviewer", "name", "alice", *REVIEWER)
    with Store(home.db_path) as store:
        store.set_reviewer_password("alice", TEST_HASH)
    put_back(home.db_path, "reviewer", "name", "alice", old)
    logins = event_count(home, "login")
    login_refused(home, PASSWORD)
    assert event_count(home, "login") == logins
    (why,) = refusals(home)
    assert "an older row was put back" in why
    with Store(home.db_path) as store, pytest.raises(Conflict, match="an older row was put back"):
        store.decide(
            p.id,
            verdict="approved",
            reviewer="alice",
            sha256=p.sha256,
            path=str(draft().path),
            proof=PasswordProof(PASSWORD),
        )
    assert decisions(home) == []
    assert len(refusals(home)) == 2  # the approval's refusal is in the log too


def test_a_disabled_reviewer_re_enabled_with_the_old_signed_row_neither_logs_in_nor_approves(home: Home) -> None:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        p = store.propose(draft())
    enabled = saved_row(home.db_path, "reviewer", "name", "alice", *REVIEWER)
    with Store(home.db_path) as store:
        store.disable_reviewer("alice")
    put_back(home.db_path, "reviewer", "name", "alice", enabled, "reviewer_fixed")
    login_refused(home, PASSWORD)
    assert event_count(home, "login") == 0 and "an older row was put back" in refusals(home)[0]
    with Store(home.db_path) as store, pytest.raises(Conflict, match="not signed by the review key"):
        store.decide(
            p.id,
            verdict="approved",
            reviewer="alice",
            sha256=p.sha256,
            path=str(draft().path),
            proof=PasswordProof(PASSWORD),
        )
    assert decisions(home) == []


def test_a_removed_passkey_put_back_neither_logs_in_nor_approves(home: Home) -> None:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        auth = enrol(store)
        (credential_id,) = [k.credential_id for k in store.passkeys("alice")]
        p = store.propose(draft())
    live = saved_row(home.db_path, "passkey", "credential_id", credential_id, "removed_at", "key_id", "signature")
    with Store(home.db_path) as store:
        store.remove_passkey("alice", credential_id)
    put_back(home.db_path, "passkey", "credential_id", credential_id, live, "passkey_forward_only")
    with Store(home.db_path) as store:
        assert store.passkey(credential_id) is None  # what passkey log-in looks up: as if unknown
        challenge = store.issue_challenge("alice", [p.id])
        with pytest.raises(ApprovalRefused, match="an older row was put back"):
            approve(store, home, p, str(draft().path), sign(auth, challenge))
    assert decisions(home) == []
    assert len(refusals(home)) == 2 and all(credential_id in r for r in refusals(home))


def test_the_latest_rows_still_log_in_and_approve(home: Home) -> None:
    """The check does not refuse what Gatekeeper itself wrote last: a new password logs in."""
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        store.set_reviewer_password("alice", TEST_HASH)
        p = store.propose(draft())
        store.decide(
            p.id,
            verdict="approved",
            reviewer="alice",
            sha256=p.sha256,
            path=str(draft().path),
            proof=PasswordProof(TEST_PASSWORD),
        )
    with review_app(home) as site:
        assert Page(site).login("alice", TEST_PASSWORD).status_code == 303
    assert refusals(home) == [] and len(decisions(home)) == 1


def test_a_row_from_before_the_keys_is_signed_once_with_its_own_event_and_logs_in(home: Home) -> None:
    """An older home: a reviewer row without a signature, its reviewer_added event without one either.
    The first key signs it as it is (trust on first use) with a reviewer_row_signed event, so the
    row is signed for its latest change and logs in."""
    shutil.rmtree(home.keys.folder)
    with sqlite3.connect(home.db_path) as conn:
        conn.execute(
            "INSERT INTO reviewer (name, password_hash, created_at) VALUES ('alice', ?, ?)", (hashed(), now_ts())
        )
    conn.close()
    with Store(home.db_path) as store:
        store.append_event("reviewer_added", "cli", {"reviewer": "alice"})
    assert ensure_keys(home)
    ((payload,),) = saved_rows(home, "SELECT payload FROM audit_event WHERE kind = 'reviewer_row_signed'")
    assert json.loads(payload)["reviewer"] == "alice" and json.loads(payload)["key_id"] in home.keys.public_ids()
    with review_app(home) as site:
        assert Page(site).login("alice", PASSWORD).status_code == 303
    assert refusals(home) == []
    assert not ensure_keys(home)  # once: the keys exist now


def saved_rows(home: Home, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(home.db_path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()
