"""Challenge flooding (issue 24, item 15): a session alone (a stolen cookie and the page's CSRF
token) gets as far as a passkey challenge, and every one was a row kept for good: 260 rows and
~2.7 MB in a few seconds. Now a reviewer has at most ``MAX_OPEN_CHALLENGES`` open; beyond that the
page answers 429 and records an ``approval_challenge_refused`` event (repeats counted, not stored);
expired rows are pruned as new ones are issued, which migration 0011 allows for expired rows only.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.canonical import format_ts
from gatekeeper.home import Home
from gatekeeper.resources import migrations_dir
from gatekeeper.store import events as ev
from gatekeeper.store import migrate
from gatekeeper.store.passkeys import MAX_OPEN_CHALLENGES, TooManyChallenges
from gatekeeper.store.store import Store
from gatekeeper.store.target import PostgresUrl
from gatekeeper.store.version import HEAD_REVISION
from tests.commit_support import World, make_world
from tests.helpers import TEST_PASSWORD, add_reviewer, draft
from tests.passkey_browser_support import served
from tests.pg_support import BACKENDS, PostgresServer, connect, raw
from tests.review_support import Page
from tests.webauthn_authenticator import SoftAuthenticator

LONG_AGO = "2020-01-01T00:00:00.000000Z"
LATER = "2999-01-01T00:00:00.000000Z"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def challenge_row(nonce: str, expires_at: str) -> tuple[str, str, str, str, str]:
    return (nonce, "alice", json.dumps(["00" * 32] * 100), "2020-01-01T00:00:00.000000Z", expires_at)


COLUMNS = ("nonce", "reviewer", "digests", "created_at", "expires_at")
INSERT = "INSERT INTO approval_challenge (nonce, reviewer, digests, created_at, expires_at) VALUES (?, ?, ?, ?, ?)"


def test_the_store_caps_open_challenges_and_prunes_expired_ones(store: Store, home: Home) -> None:
    add_reviewer(store)
    conn = raw(home)
    for n in range(50):  # stale rows a flood left before this version: expired long ago
        conn.execute(INSERT, challenge_row(f"stale-{n}", LONG_AGO))
    conn.commit()
    proposal = store.propose(draft("notes/a.md", b"a\n")).id
    issued = [store.issue_challenge("alice", [proposal]) for _ in range(MAX_OPEN_CHALLENGES)]
    with pytest.raises(TooManyChallenges, match=r"8 approvals are already waiting for alice's passkey") as refused:
        store.issue_challenge("alice", [proposal])
    assert "expires (in 4 min)" in str(refused.value) or "expires (in 5 min)" in str(refused.value)
    rows = conn.execute("SELECT nonce FROM approval_challenge ORDER BY nonce").fetchall()
    assert sorted(r[0] for r in rows) == sorted(c.nonce for c in issued)  # the stale 50 are gone


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_0011_lets_only_expired_challenges_be_deleted(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """From 0010 (rows never deleted) to 0011, with rows in the table, on either backend."""
    migrations = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), migrations, ignore=shutil.ignore_patterns("__pycache__"))
    for script in (migrations / "versions").glob("*.py"):
        if script.name[:4] > "0010":
            script.unlink()
    db: Path | PostgresUrl = tmp_path / "gatekeeper.db"
    if backend == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        with server.admin() as admin:
            admin.execute("CREATE DATABASE gk_0011")
        db = PostgresUrl(server.cluster.url("gk_0011"))
        request.addfinalizer(lambda: server.drop(db))
    migrate.upgrade(db, migrations)
    conn = connect(db)
    conn.execute("INSERT INTO reviewer (name, password_hash, created_at) VALUES ('alice', 'h', 't')")
    conn.execute(INSERT, challenge_row("expired", LONG_AGO))
    conn.execute(INSERT, challenge_row("live", LATER))
    conn.commit()
    refused = psycopg_or_sqlite(db)
    with pytest.raises(refused, match="DELETE refused"):  # 0010: no row may go
        conn.execute("DELETE FROM approval_challenge WHERE nonce = 'expired'")
    conn.rollback()

    assert migrate.upgrade(db).pending == (HEAD_REVISION,)
    conn.execute("DELETE FROM approval_challenge WHERE nonce = 'expired'")
    conn.commit()
    with pytest.raises(refused, match="kept until it expires: DELETE refused"):
        conn.execute("DELETE FROM approval_challenge WHERE nonce = 'live'")
    conn.rollback()
    if backend == "postgres":
        with pytest.raises(refused, match="TRUNCATE refused"):
            conn.execute("TRUNCATE approval_challenge")
    with pytest.raises(refused, match="only used_at"):
        conn.execute("UPDATE approval_challenge SET digests = '[]'")
    conn.rollback()
    assert [r[0] for r in conn.execute("SELECT nonce FROM approval_challenge").fetchall()] == ["live"]


def psycopg_or_sqlite(db: Path | PostgresUrl) -> type[Exception]:
    if isinstance(db, PostgresUrl):
        import psycopg

        return psycopg.IntegrityError
    return sqlite3.IntegrityError


def enrol_passkey(world: World, page: Page) -> None:
    """Alice enrols a (software) passkey over HTTP, as the page's script does."""
    with world.store() as store:
        token = store.issue_enrolment("alice")
    html = page.client.get(f"/enrol/{token}").text
    options = re.search(r'data-options="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    credential = SoftAuthenticator(origin=page.base).register_options(options.replace("&#34;", '"'))
    done = page.client.post(f"/api/enrol/{token}", data={"credential": json.dumps(credential), "label": "key"})
    assert done.status_code == 200, done.text


def refusals(world: World, kind: str) -> list[dict[str, Any]]:
    rows = world.db_rows("SELECT payload FROM audit_event WHERE kind = ? ORDER BY seq", kind)
    return [json.loads(r[0]) for r in rows]


def test_a_session_flooding_challenges_over_http_gets_eight_then_429(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w")
    with served(world) as site:
        page = Page(site.base)
        enrol_passkey(world, page)
        assert page.login(password=TEST_PASSWORD).status_code == 303
        target = world.propose("notes/target.md", b"target\n", verdict=None)
        csrf = page.csrf(target)
        with world.store() as store, store.transaction() as tx:
            for n in range(40):  # what an earlier flood left, expired long ago
                tx.insert("approval_challenge", dict(zip(COLUMNS, challenge_row(f"old-{n}", LONG_AGO), strict=True)))
        answers = [page.client.post(f"/api/proposals/{target}/challenge", data={"csrf_token": csrf}) for _ in range(60)]
        statuses = [a.status_code for a in answers]
        assert statuses == [200] * MAX_OPEN_CHALLENGES + [429] * (60 - MAX_OPEN_CHALLENGES), statuses
        said = answers[-1].json()["error"]
        assert "8 approvals are already waiting for alice's passkey" in said and "log out" in said, said
        rows = world.db_rows("SELECT nonce, length(digests) FROM approval_challenge")
        assert len(rows) == MAX_OPEN_CHALLENGES  # the 40 old ones pruned, no 9th
        assert {r[0] for r in rows} == {a.json()["nonce"] for a in answers[:MAX_OPEN_CHALLENGES]}
        [first] = refusals(world, ev.CHALLENGE_REFUSED)
        assert first == {"reviewer": "alice", "open": MAX_OPEN_CHALLENGES, "limit": MAX_OPEN_CHALLENGES}
    # the page stopped cleanly: the 51 repeats are one counted event, not 51 rows
    [repeated] = [e for e in refusals(world, ev.REFUSAL_REPEATED) if e["kind"] == ev.CHALLENGE_REFUSED]
    assert repeated["repeats"] == 60 - MAX_OPEN_CHALLENGES - 1


def test_a_clock_ahead_of_the_databases_prunes_nothing_live_and_still_issues(
    store: Store, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prune uses this machine's clock, the trigger the database's: when this one runs a day
    ahead, the rows it thinks expired are live to the database, which refuses the DELETE; the
    challenge is issued all the same (the prune runs in a savepoint) and the rows stay."""
    from datetime import UTC, datetime, timedelta

    from gatekeeper.store import passkeys

    add_reviewer(store)
    proposal = store.propose(draft("notes/a.md", b"a\n")).id
    conn = raw(home)
    conn.execute(INSERT, challenge_row("live-to-the-database", format_ts(datetime.now(UTC) + timedelta(hours=2))))
    conn.commit()
    monkeypatch.setattr(passkeys, "utc_now", lambda: datetime.now(UTC) + timedelta(days=1))
    issued = store.issue_challenge("alice", [proposal])
    nonces = {r[0] for r in conn.execute("SELECT nonce FROM approval_challenge").fetchall()}
    assert nonces == {"live-to-the-database", issued.nonce}
