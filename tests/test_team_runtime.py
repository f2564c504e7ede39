"""Team mode beyond the store: the proxy, the review page and the CLI on PostgreSQL.

Every process here is real: the proxy as a stdio subprocess driven by the official MCP client in
front of the bundled notes server, the review page under uvicorn over real HTTP, the CLI as
subprocesses. Each names its database only by ``GATEKEEPER_DATABASE_URL`` (the ``home`` fixture sets
it for ``backend = postgres``), so a call site that still opened the home's SQLite file would fail
here or leave a ``gatekeeper.db`` behind. PostgreSQL killed under a running proxy is in
tests/test_team_outage.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from gatekeeper.home import Home
from gatekeeper.store import events as ev
from gatekeeper.store.follow import Changes
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import ENV_DATABASE_URL, PostgresUrl
from gatekeeper.trust import keys as gk_keys
from gatekeeper.trust.signing import DecisionFacts
from tests.helpers import PROOF, TEST_PASSWORD, add_reviewer, draft, record_commit, wait_until
from tests.pg_support import PostgresServer, raw
from tests.process_support import Lines
from tests.proxy_support import REPO, proxy_params, write_policy
from tests.review_support import PASSWORD, Page, free_port, review_server, start_up

SIGNED = "SELECT key_id, signature FROM decision WHERE proposal_id = ?"
LISTEN = "LISTEN gatekeeper_change"


@pytest.fixture
def backend() -> str:
    return "postgres"


def gk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess with this test's environment (its home, its database URL)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "gatekeeper", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
    )


@asynccontextmanager
async def proxied_on(policy: Path, home: Home) -> AsyncIterator[Client]:
    """The real proxy, told its database only by the environment variable."""
    from mcp.client.stdio import stdio_client

    params = proxy_params(policy, home.path)
    params.env = {**(params.env or {}), ENV_DATABASE_URL: os.environ[ENV_DATABASE_URL]}
    with open(home.path / "proxy-stderr.log", "a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            yield client


def open_store(home: Home) -> Store:
    """The home's store as ``Home.store`` opens it (spelt out, so these tests also run against older code)."""
    return Store(home.database, keys_dir=home.keys.folder)


def decision_facts(conn: Any, proposal_id: str) -> DecisionFacts:
    """A decision as its Ed25519 signature covers it, rebuilt from the rows (a password approval: no assertion)."""
    row = conn.execute(
        "SELECT p.id, p.server, p.tool, p.workspace, p.workspace_real, d.path, d.mode, d.base_sha256, d.sha256, "
        "d.verdict, d.reviewer, d.reason, d.decided_at, d.method, d.nonce "
        "FROM decision d JOIN proposal p ON p.id = d.proposal_id WHERE p.id = ?",
        (proposal_id,),
    ).fetchone()
    return DecisionFacts(*row)


def test_keys_dir_names_the_folder_keys_uses(home: Home) -> None:
    """``Home.keys_dir`` spells the folder without importing cryptography; it must stay the same one."""
    from gatekeeper.home import KEYS_DIR

    assert KEYS_DIR == gk_keys.KEYS_DIR and home.keys_dir == home.keys.folder


@pytest.mark.anyio
async def test_the_proxy_proposes_into_postgres_and_reads_status_from_it(tmp_path: Path, home: Home) -> None:
    policy = write_policy(tmp_path)
    body = "line one\n\u202e é\n"
    async with proxied_on(policy, home) as proxy:
        result = await proxy.call_tool("create_note", {"title": "Team plans", "body": body})
        assert not result.is_error, result.content
        summary = result.structured_content
        assert summary is not None and summary["status"] == "pending_approval"
        pid = summary["proposal_id"]
        status = await proxy.call_tool("gatekeeper_proposal_status", {"proposal_id": pid})
        assert not status.is_error and status.structured_content["status"] == "pending", status.content
        with open_store(home) as store:  # decided elsewhere (the review page): the status tool reads it from there
            add_reviewer(store)
            store.decide(
                pid,
                verdict="rejected",
                reviewer="alice",
                reason="not now",
                sha256=summary["sha256"],
                path=summary["destination"],
            )
        status = await proxy.call_tool("gatekeeper_proposal_status", {"proposal_id": pid})
        assert status.structured_content["status"] == "rejected", status.content
    rows = raw(home).execute("SELECT id, content, sha256, path, server, tool FROM proposal").fetchall()
    assert [tuple(r) for r in rows] == [
        (pid, body.encode(), summary["sha256"], "notes/team-plans.md", "notes", "create_note")
    ]
    kinds = [r[0] for r in raw(home).execute("SELECT kind FROM audit_event ORDER BY seq").fetchall()]
    assert ev.PROPOSAL_CREATED in kinds and ev.DECISION in kinds
    assert not (home.path / "gatekeeper.db").exists()  # nothing SQLite was made beside it


@pytest.mark.slow
def test_review_page_on_postgres_logs_in_decides_signs_and_audit_verifies(home: Home) -> None:
    added = gk("reviewer", "add", "alice", "--password-stdin", stdin=PASSWORD + "\n")
    assert added.returncode == 0 and "Added reviewer alice." in added.stdout, added.stderr
    with open_store(home) as store:
        a = store.propose(draft("notes/a.md", b"A\n"))
        b = store.propose(draft("notes/b.md", b"B\n"))
    with review_server(home) as base:
        page = Page(base)
        assert page.login().status_code == 303
        queue = page.client.get("/")
        assert queue.status_code == 200 and "notes/a.md" in queue.text and "notes/b.md" in queue.text
        csrf = page.csrf(a.id)
        assert page.approve(a.id, a.sha256, "notes/a.md", csrf).status_code == 303  # password typed again
        rejected = page.client.post(f"/proposals/{b.id}/reject", data={"reason": "not now", "csrf_token": csrf})
        assert rejected.status_code == 303
        detail = page.client.get(f"/api/proposals/{a.id}").json()
        assert detail["status"] == "approved"
        assert re.search(r"audit verify: OK \(\d+ events\)", page.client.get("/").text)  # the chain watch
    rows = raw(home).execute("SELECT proposal_id, verdict, reviewer, method FROM decision ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [(a.id, "approved", "alice", "password"), (b.id, "rejected", "alice", None)]
    facts = decision_facts(raw(home), a.id)
    key_id, signature = raw(home).execute(SIGNED, (a.id,)).fetchone()
    assert key_id == home.keys.signer().key_id
    assert home.keys.keyring().verify(key_id, facts.message(key_id), signature)  # Ed25519, not the HMAC
    assert not home.keys.keyring().verify(key_id, replace(facts, path="notes/b.md").message(key_id), signature)
    kinds = [r[0] for r in raw(home).execute("SELECT kind FROM audit_event").fetchall()]
    assert ev.CHECKPOINT in kinds  # the page signed the head at start
    verified = gk("audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("OK: ") and "signed checkpoint(s)" in verified.stdout
    assert not (home.path / "gatekeeper.db").exists()


def listening(home: Home) -> int:
    """Sessions of this database LISTENing for the change signal (their last statement)."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = ?"
    return int(raw(home).execute(sql, (LISTEN,)).fetchone()[0])


def test_the_change_signal_listens_on_postgres_and_polls_while_the_listener_is_lost(home: Home) -> None:
    with Reader(home.database) as reader, open_store(home) as store:
        changes = Changes(reader, fallback=None)
        assert listening(home) == 1  # a LISTEN connection, not a query every look
        assert changes.changed()  # the first look
        assert not changes.changed()
        store.append_event(ev.INIT, "test")
        wait_until(changes.changed, 10, "the NOTIFY of a committed write")
        assert not changes.changed()

        sql = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query = ?"
        raw(home).execute(sql, (LISTEN,))  # a restart or a failover, for the listener alone
        wait_until(lambda: listening(home) == 0, 10, "the listener to be gone")
        store.append_event(ev.INIT, "test")
        wait_until(changes.changed, 10, "a change seen without the listener")
        wait_until(lambda: changes.changed() is not None and listening(home) == 1, 10, "listening again")
        while changes.changed():  # what happened meanwhile, said once
            pass
        store.append_event(ev.INIT, "test")
        wait_until(changes.changed, 10, "the NOTIFY to the new listener")
        changes.close()
        wait_until(lambda: listening(home) == 0, 10, "the listener closed")


@pytest.fixture
def committed(tmp_path: Path, home: Home) -> dict[str, Any]:
    """A reviewer, a proposal approved and committed (its file on disk), one pending: what the CLI reads."""
    workspace = tmp_path / "workspace"
    (workspace / "notes").mkdir(parents=True)
    policy = write_policy(tmp_path)
    with open_store(home) as store:
        add_reviewer(store)
        done = store.propose(replace(draft("notes/done.md", b"done\n"), workspace=str(workspace)))
        store.decide(
            done.id, verdict="approved", reviewer="alice", sha256=done.sha256, path="notes/done.md", proof=PROOF
        )
        (workspace / "notes" / "done.md").write_bytes(b"done\n")
        final = str(workspace / "notes" / "done.md")
        record_commit(store, done.id, "created", observed_sha256=done.sha256, final_path=final)
        pending = store.propose(replace(draft("notes/later.md", b"later\n"), workspace=str(workspace)))
    ids = {"done": done.id, "pending": pending.id, "done12": done.id[:12], "pending8": pending.id[:8]}
    return {**ids, "policy": str(policy), "home": str(home.path)}


# (arguments, stdin, what the output must say); {done}, {pending}, {policy}, {home} are filled in.
COMMANDS: list[tuple[tuple[str, ...], str | None, str]] = [
    (("audit", "proposals"), None, r"^{pending8}\w*  pending "),  # a short id (issue 24 item 9)
    (("audit", "proposals", "--wide"), None, r"{pending}.*pending"),
    (("audit", "show", "{done12}"), None, r"^proposal {done}$"),  # any unique prefix, on PostgreSQL too
    (("audit", "proposals", "--status", "committed", "--json"), None, r'"id": "{done}"'),
    (("audit", "show", "{done}"), None, r"committed"),
    (("audit", "log", "--kind", "decision"), None, r"decision"),
    (("audit", "head"), None, r"^\d+ [0-9a-f]{{64}}$"),
    (("audit", "export"), None, r"proposal_created"),
    (("audit", "verify", "--files", "--approvals", "--policy", "{policy}"), None, r"OK: 1 committed file"),
    (("audit", "checkpoint"), None, r"Signed checkpoint at seq \d+"),
    (("reviewer", "list", "--json"), None, r'"enabled": true, "name": "alice"'),
    (("reviewer", "add", "bob", "--password-stdin", "--policy", "{policy}"), TEST_PASSWORD + "\n", r"/enrol/"),
    (("reviewer", "passwd", "alice", "--password-stdin"), "another long password\n", r"Changed the password of alice"),
    (("reviewer", "disable", "alice"), None, r"Disabled reviewer alice"),
    (("reviewer", "enrol", "alice", "--policy", "{policy}"), None, r"/enrol/"),
    (("reviewer", "passkeys", "alice"), None, r"^0 passkey\(s\) of alice"),
    (("reviewer", "passkey-remove", "alice", "nope"), None, r"ERR:.*no passkey"),
    (("review", "login-link", "alice"), None, r"/login/link\?token="),
    (("keys", "rotate"), None, r"New signing key [0-9a-f]{{16}}"),
    (("keys", "list"), None, r"signing \(private key here\)"),
    (("policy", "check", "--policy", "{policy}", "--accept-changes"), None, r"create_note"),
    (("revert", "{done}", "--policy", "{policy}"), None, r"Proposed: \S+ \(delete notes/done.md, reverting {done}\)"),
]


@pytest.mark.parametrize("args, stdin, expect", COMMANDS, ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_every_cli_command_runs_on_postgres(
    home: Home, committed: dict[str, Any], args: tuple[str, ...], stdin: str | None, expect: str
) -> None:
    done = gk(*(a.format(**committed) for a in args), stdin=stdin)
    said = done.stdout.strip() if done.returncode == 0 else "ERR: " + done.stderr.strip()
    assert "Traceback" not in done.stderr and "SQLite" not in done.stderr, done.stderr
    assert re.search(expect.format(**committed), said, re.MULTILINE), said
    assert done.returncode == (1 if said.startswith("ERR:") else 0)
    assert not (home.path / "gatekeeper.db").exists()


@pytest.fixture
def blank_database(postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[PostgresUrl]:
    """An empty PostgreSQL database (no schema), named by the environment, as a team's administrator makes it."""
    with postgres_server.admin() as conn:
        conn.execute("CREATE DATABASE gk_blank_up")
    url = PostgresUrl(postgres_server.cluster.url("gk_blank_up"))
    monkeypatch.setenv(ENV_DATABASE_URL, url.url)
    yield url
    postgres_server.drop(url)


@pytest.mark.slow
def test_up_on_a_blank_postgres_database_initialises_it_and_runs_the_review_page(
    tmp_path: Path, blank_database: PostgresUrl
) -> None:
    policy = write_policy(tmp_path)
    home, port = Home(tmp_path / "team-home"), free_port()
    proc = start_up(home.path, port, policy, PASSWORD)
    lines = Lines(proc)
    try:
        assert "database postgresql://gk@" in lines.wait_for("Initialised a Gatekeeper home")
        lines.wait_for("Added reviewer alice")
        link = re.search(r"(http://\S+/login/link\?token=\S+)", lines.wait_for("one-time link"))
        assert link is not None
        import httpx

        with httpx.Client(follow_redirects=False) as client:
            assert client.get(link.group(1)).status_code == 303  # the review child logs in on PostgreSQL
        with open_store(home) as store:
            p = store.propose(replace(draft("notes/from-up.md", b"hi\n"), workspace=str(tmp_path / "workspace")))
        lines.wait_for(f"proposal  {p.id}")  # up's own feed follows PostgreSQL
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert not (home.path / "gatekeeper.db").exists()
    with Reader(home.database) as reader:
        assert [r["name"] for r in reader.reviewers()] == ["alice"]
