"""``audit verify`` checks every reviewer and passkey row against its signature, on SQLite and on
PostgreSQL: a database writer without the key who replaces a password hash or swaps a passkey's
public key (copying another row's valid signature, so the guard triggers let the UPDATE through) is
named, with what to do, and the command fails; doing what it says makes the home verify again.
The real command runs in a subprocess, as an auditor runs it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from typing import Any

import pytest

from gatekeeper.audit.rows import RowProblem, passkey_action
from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import PostgresUrl
from tests.helpers import TEST_PASSWORD, add_reviewer
from tests.passkey_support import enrol
from tests.pg_support import BACKENDS, connect_now
from tests.proxy_support import REPO


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def gk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI with this test's environment (its home; its database URL on PostgreSQL)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "gatekeeper", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=60)


def verify() -> tuple[int, dict[str, Any]]:
    run = gk("audit", "verify", "--json")
    assert run.stdout and "Traceback" not in run.stderr, run.stderr
    return run.returncode, json.loads(run.stdout)


def tamper(home: Home, sql: str, *params: object, unguard: str | None = None, trigger: str = "forward_only") -> None:
    """As a writer with the database and no key: the new values with another row's signature (the
    ``unguard`` table's guard ``trigger``, e.g. the one that keeps a passkey's fixed columns fixed, dropped first)."""
    conn = connect_now(home.database)
    try:
        if unguard is not None:
            on = f" ON {unguard}" if isinstance(home.database, PostgresUrl) else ""
            conn.execute(f"DROP TRIGGER {unguard}_{trigger}{on}")
        conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


@pytest.fixture
def credential(home: Home, store: Store) -> str:
    """alice and bob, each with a passkey; alice's credential id."""
    add_reviewer(store, "alice")
    add_reviewer(store, "bob")
    enrol(store, "alice")
    enrol(store, "bob")
    (alice,) = [p.credential_id for p in store.passkeys("alice")]
    return alice


def test_an_intact_home_verifies_every_row(credential: str) -> None:
    code, report = verify()
    assert (code, report["ok"], report["rows_checked"], report["row_problems"]) == (0, True, 4, [])
    text = gk("audit", "verify")
    assert text.returncode == 0 and "OK: 4 reviewer and passkey row(s)" in text.stdout, text.stdout


def test_a_replaced_password_hash_is_named_and_fails(home: Home, credential: str) -> None:
    tamper(
        home,
        "UPDATE reviewer SET password_hash = ?, signature = (SELECT signature FROM reviewer WHERE name = 'bob') "
        "WHERE name = 'alice'",
        "$argon2id$v=19$m=65536,t=3,p=4$mallory$mallory",
    )
    code, report = verify()
    assert code == 1 and report["ok"] is False
    (problem,) = report["row_problems"]
    assert (problem["table"], problem["reviewer"], problem["credential_id"]) == ("reviewer", "alice", None)
    assert "not signed by the review key for its latest change" in problem["problem"]
    text = gk("audit", "verify")
    assert text.returncode == 1
    line = next(x for x in text.stdout.splitlines() if x.startswith("REVIEWER alice: "))
    assert "`gatekeeper reviewer passwd alice`" in line and "`gatekeeper reviewer disable alice`" in line, line
    assert "FAILED: 4 reviewer and passkey row(s)" in text.stdout and "1 problem(s)" in text.stdout

    done = gk("reviewer", "passwd", "alice", "--password-stdin", stdin=TEST_PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    assert verify()[0] == 0  # what the line says to do signs the row afresh


def test_a_new_password_does_not_sign_a_reviewer_re_enabled_behind_gatekeepers_back(
    home: Home, store: Store, credential: str
) -> None:
    """Disabling is final; a writer who puts alice's signed pre-disable row back (a replay, so the
    signature guard lets it through) must not get it re-signed by the next `reviewer passwd`."""
    with Reader(home.database) as r:
        (before,) = [p for p in (json.loads(e[5]) for e in r.events(kind="reviewer_added")) if p["reviewer"] == "alice"]
    store.disable_reviewer("alice")
    tamper(
        home,
        "UPDATE reviewer SET disabled_at = NULL, key_id = ?, signature = ? WHERE name = 'alice'",
        before["key_id"],
        before["signature"],
        unguard="reviewer",
        trigger="fixed",
    )
    assert "an older row was put back" in verify()[1]["row_problems"][0]["problem"]

    done = gk("reviewer", "passwd", "alice", "--password-stdin", stdin=TEST_PASSWORD + "\n")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "was disabled (audit seq" in done.stderr and "says enabled" in done.stderr, done.stderr
    assert verify()[0] == 1  # still named, not laundered
    advised = gk("reviewer", "disable", "alice")  # what the refusal says to do
    assert advised.returncode == 0, advised.stderr
    assert verify()[0] == 0 and store.reviewer("alice").disabled_at is not None  # type: ignore[union-attr]


def test_a_swapped_passkey_public_key_is_named_and_fails(home: Home, credential: str) -> None:
    tamper(
        home,
        "UPDATE passkey SET public_key = b.public_key, signature = b.signature FROM "
        "(SELECT public_key, signature FROM passkey WHERE reviewer = 'bob') AS b WHERE credential_id = ?",
        credential,
        unguard="passkey",
    )
    code, report = verify()
    assert code == 1 and report["ok"] is False
    (problem,) = report["row_problems"]
    assert (problem["table"], problem["reviewer"], problem["credential_id"]) == ("passkey", "alice", credential)
    assert "not signed by the review key for its latest change" in problem["problem"]
    text = gk("audit", "verify")
    line = next(x for x in text.stdout.splitlines() if x.startswith(f"PASSKEY {credential} of alice: "))
    advised = f"gatekeeper reviewer passkey-remove -- alice {credential}"
    assert f"`{advised}`" in line, line

    assert gk(*shlex.split(advised)[1:]).returncode == 0  # the command as advised
    assert verify()[0] == 0


def test_the_advised_passkey_command_takes_a_credential_that_starts_with_a_dash(home: Home) -> None:
    """A credential id is base64url: one in 64 starts with "-". The advised command must still name
    it as the credential (an unknown one here), not fail on it as an unknown option."""
    problem = RowProblem("passkey", "alice", "-bpq1SZujIQ", "tampered", passkey_action("alice", "-bpq1SZujIQ"))
    advised = problem.line().split("`")[1]
    done = gk(*shlex.split(advised)[1:])
    assert "No such option" not in done.stderr, done.stderr
    assert "-bpq1SZujIQ" in done.stderr, done.stderr
