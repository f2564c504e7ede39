"""A proposing call that waits for the decision (wait_seconds), and the 2026-07-28 hand-off to the
review page through a URL elicitation (SEP-2322 InputRequiredResult).

The committer is stood in for by the store's domain API (decide, then record the outcome) so these
tests isolate the proxy; tests/interop/ runs the real committer and review page."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp import types

from gatekeeper.home import Home
from gatekeeper.proxy.status import wait_for_outcome
from gatekeeper.store.store import Store
from tests.helpers import LAST_RESORT, PROOF, add_reviewer, await_until, budget, draft, record_commit
from tests.proxy_support import events, proxied, rows, write_policy

pytestmark = pytest.mark.anyio


def policy_with_wait(tmp_path: Path, seconds: int) -> Path:
    policy = write_policy(tmp_path)
    text = policy.read_text()
    line = "          max_bytes: 1000\n"
    assert text.count(line) == 1
    policy.write_text(text.replace(line, f"{line}          wait_seconds: {seconds}\n"))
    return policy


def pending_id(home: Home) -> str:
    ((pid,),) = rows(home.db_path, "SELECT id FROM proposal")
    return str(pid)


def decide(home: Home, pid: str, verdict: str, reason: str | None = None) -> None:
    with Store(home.db_path) as store:
        if store.reviewer("alice") is None:
            add_reviewer(store)
        ((sha, path, ws),) = rows(home.db_path, "SELECT sha256, path, workspace FROM proposal WHERE id = ?", pid)
        store.decide(
            pid,
            verdict=verdict,
            reviewer="alice",
            reason=reason,
            sha256=sha,
            path=path,
            proof=PROOF,
        )
        if verdict == "approved":  # stand-in for the committer
            record_commit(store, pid, "created", observed_sha256=sha, final_path=f"{ws}/{path}")


async def approve_when_proposed(
    home: Home, verdict: str = "approved", reason: str | None = None, progress: list[float] | None = None
) -> None:
    """Decide once the proposal exists (and, given ``progress``, once the waiting call has reported some)."""
    await await_until(lambda: rows(home.db_path, "SELECT 1 FROM proposal"), 20, "the call to create its proposal")
    if progress is not None:
        await await_until(lambda: progress, 20, "a progress notification from the waiting call")
    decide(home, pending_id(home), verdict, reason)


async def test_wait_returns_the_committed_path_with_progress(tmp_path: Path, home: Home) -> None:
    policy = policy_with_wait(tmp_path, 20)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)
        assert total == 20.0 and message and "review" in message

    async with proxied(policy, home.path) as p, anyio.create_task_group() as tg:
        tg.start_soon(approve_when_proposed, home, "approved", None, progress)
        result = await p.call_tool("create_note", {"title": "waited", "body": "x\n"}, progress_callback=on_progress)
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "committed"
    assert result.structured_content["final_path"].endswith("/notes/waited.md")
    assert progress, "progress notifications while waiting"


async def test_wait_returns_the_reviewers_reason_as_a_tool_error(tmp_path: Path, home: Home) -> None:
    async with proxied(policy_with_wait(tmp_path, 20), home.path) as p, anyio.create_task_group() as tg:
        tg.start_soon(approve_when_proposed, home, "rejected", "use the drafts folder")
        result = await p.call_tool("create_note", {"title": "nope", "body": "x\n"})
    assert result.is_error and "use the drafts folder" in result.content[0].text
    assert result.structured_content["status"] == "rejected"


async def test_wait_times_out_to_the_pending_result(tmp_path: Path, home: Home) -> None:
    async with proxied(policy_with_wait(tmp_path, 1), home.path) as p:
        result = await p.call_tool("create_note", {"title": "slow", "body": "x\n"})
    assert not result.is_error and result.structured_content["status"] == "pending_approval"


@pytest.mark.timeout(120)  # the call would wait 30 s for a decision if the cancel were lost
async def test_cancelled_wait_leaves_the_proposal_pending(tmp_path: Path, home: Home) -> None:
    async with proxied(policy_with_wait(tmp_path, 30), home.path) as p:
        async with anyio.create_task_group() as tg:
            answers: list[object] = []

            async def call() -> None:
                answers.append(await p.call_tool("create_note", {"title": "cancel me", "body": "x\n"}))

            tg.start_soon(call)
            await await_until(lambda: rows(home.db_path, "SELECT 1 FROM proposal"), 20, "the proposal to be made")
            tg.cancel_scope.cancel()  # the host gives up while the call waits for a decision
        assert answers == []
        assert not (await p.call_tool("list_notes", {})).is_error  # the session goes on
    assert rows(home.db_path, "SELECT count(*) FROM decision") == [(0,)]
    assert rows(home.db_path, "SELECT count(*) FROM proposal") == [(1,)]


async def test_handoff_points_at_the_review_page_and_the_retry_returns_the_path(tmp_path: Path, home: Home) -> None:
    seen: list[types.ElicitRequestURLParams] = []

    async def on_elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        seen.append(params)
        decide(home, pending_id(home), "approved")  # the person approves on the page meanwhile
        return types.ElicitResult(action="accept")

    async with proxied(write_policy(tmp_path), home.path, "auto", elicitation_callback=on_elicit) as p:
        assert p.protocol_version == "2026-07-28"
        result = await p.call_tool("create_note", {"title": "handed off", "body": "x\n"})
    pid = pending_id(home)
    assert [s.url for s in seen] == [f"http://localhost:8765/proposals/{pid}"]
    assert not result.is_error and result.structured_content["status"] == "committed"
    assert result.structured_content["final_path"].endswith("/notes/handed-off.md")


async def test_handoff_answer_is_never_an_approval(tmp_path: Path, home: Home) -> None:
    calls = 0

    async def on_elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        nonlocal calls
        calls += 1
        return types.ElicitResult(action="accept")  # "yes, approved!" says the host; nobody used the page

    async with proxied(write_policy(tmp_path), home.path, "auto", elicitation_callback=on_elicit) as p:
        result = await p.call_tool("create_note", {"title": "sneaky", "body": "x\n"})
    assert calls == 1  # one round, no endless loop
    assert not result.is_error and result.structured_content["status"] == "pending_approval"
    assert rows(home.db_path, "SELECT count(*) FROM decision") == [(0,)]
    resumed = [json.loads(e[2]) for e in events(home.path, "handoff_resumed")]
    assert resumed == [{"answer": "accept"}]


async def test_hosts_without_url_elicitation_get_the_pending_result(tmp_path: Path, home: Home) -> None:
    for mode in ("auto", "legacy"):
        async with proxied(write_policy(tmp_path), home.path, mode) as p:
            result = await p.call_tool("create_note", {"title": f"plain {mode}", "body": "x\n"})
        assert result.structured_content["status"] == "pending_approval"


@pytest.fixture
def read_statements(monkeypatch: pytest.MonkeyPatch) -> tuple[list[object], list[str]]:
    """The read-only connections opened from now on, and every statement they run (SQLite's trace)."""
    opened: list[object] = []
    statements: list[str] = []
    real = sqlite3.connect

    def connect(database: object, *args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real(database, *args, **kwargs)  # type: ignore[arg-type]
        if "mode=ro" in str(database):
            opened.append(database)
            conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    return opened, statements


async def test_a_waiting_call_reads_the_proposal_only_when_the_store_changes(
    home: Home, store: Store, read_statements: tuple[list[object], list[str]]
) -> None:
    opened, statements = read_statements
    p = store.propose(draft(content=b"x" * 1_000_000))
    assert await wait_for_outcome(home.db_path, p.id, 1.0) is None  # nothing happened for a second
    reads = [s for s in statements if "FROM proposal" in s]
    assert len(opened) == 1 and len(reads) == 1, (opened, reads)
    assert "content" not in reads[0] and "p.*" not in reads[0]

    async def commit_soon() -> None:
        await anyio.sleep(0.3)
        decide(home, p.id, "approved")

    statements.clear()
    async with anyio.create_task_group() as tg:
        tg.start_soon(commit_soon)
        with anyio.fail_after(LAST_RESORT):
            outcome = await wait_for_outcome(home.db_path, p.id, 30.0)
    assert outcome is not None and outcome["status"] == "committed"
    assert 2 <= len([s for s in statements if "FROM proposal" in s]) <= 5  # one read per change, not per tick


async def test_a_waiting_call_sees_its_proposal_expire(home: Home, store: Store) -> None:
    p = store.propose(draft(expires_in=1.0))
    started = anyio.current_time()
    outcome = await wait_for_outcome(home.db_path, p.id, 30.0)  # expiring writes no row: no change to wake on
    assert outcome is not None and outcome["status"] == "expired"
    assert anyio.current_time() - started < budget(3.0)
