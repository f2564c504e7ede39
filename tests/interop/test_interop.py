"""The four end-to-end stories of issue 5/5, each through the real review page in Chromium and
the real committer, to the file on disk."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, types

from tests.interop.conftest import Stack, decide_in_browser
from tests.peers.external import filesystem_server, git_server, old_notes_policy
from tests.proxy_support import proxy_params, write_policy
from tests.review_support import Page

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def wait_for_file(path: Path, timeout: float = 20) -> bytes:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was not created"
        time.sleep(0.05)
    return path.read_bytes()


def approve_again(stack: Stack, pid: str) -> int:
    """A second approval of the same proposal, posted like the page would, by a freshly logged-in reviewer."""
    with sqlite3.connect(stack.home / "gatekeeper.db") as conn:
        sha, path = conn.execute("SELECT sha256, path FROM proposal WHERE id = ?", (pid,)).fetchone()
    page = Page(stack.base)
    page.login("alice", "interop password 123")
    csrf = page.csrf(pid)
    return page.approve(pid, sha, path, csrf).status_code


async def status_of(client: Client, pid: str) -> dict:
    result = await client.call_tool("gatekeeper_proposal_status", {"proposal_id": pid})
    return result.structured_content or {}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_filesystem_server_write_approved_in_the_browser(
    tmp_path: Path, stack_for: object, browser: object, mode: str
) -> None:
    binary = filesystem_server()
    shared = tmp_path / "shared"
    shared.mkdir()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"version: 1\nservers:\n  files:\n    command: {binary}\n    args: [{str(shared)!r}]\n"
        f"    workspace: {shared}\n    tools:\n      read_text_file: allow\n"
        "      write_file:\n        propose:\n          path: {arg: path}\n          content: {arg: content}\n"
    )
    stack: Stack = stack_for(policy)  # type: ignore[operator]
    content = "exact bytes \u00e9\u202e\n\tend"
    target = shared / "report.md"
    async with Client(proxy_params(policy, stack.home), mode=mode) as client:
        proposed = await client.call_tool("write_file", {"path": str(target), "content": content})
        pid = proposed.structured_content["proposal_id"]
        assert not target.exists()
        # the page reloads after the decision; the committer may already have run ("committed")
        assert await anyio.to_thread.run_sync(decide_in_browser, browser, stack, pid) in ("approved", "committed")
        assert wait_for_file(target) == content.encode()
        assert (await status_of(client, pid))["status"] == "committed"
        # a second identical approval attempt is refused (409), and nothing changes on disk
        assert await anyio.to_thread.run_sync(approve_again, stack, pid) == 409
        assert target.read_bytes() == content.encode()
        read = await client.call_tool("read_text_file", {"path": str(target)})
        assert read.content[0].text == content  # type: ignore[union-attr]
    decisions = (
        sqlite3.connect(stack.home / "gatekeeper.db")
        .execute("SELECT count(*) FROM decision WHERE proposal_id = ?", (pid,))
        .fetchone()
    )
    assert decisions == (1,)


async def test_git_server_reads_pass_writes_denied(tmp_path: Path, home_for_git: Path) -> None:
    binary = git_server()
    repo = tmp_path / "repo"
    repo.mkdir()
    for cmd in (["git", "init", "-q"], ["git", "config", "user.name", "T"], ["git", "config", "user.email", "t@x"]):
        subprocess.run(cmd, cwd=repo, check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "first"], cwd=repo, check=True)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"version: 1\nservers:\n  git:\n    command: {binary}\n    args: [--repository, {str(repo)!r}]\n"
        f"    workspace: {repo}\n    tools:\n      git_status: allow\n      git_log: allow\n"
        "      git_diff_unstaged: allow\n"
    )
    async with Client(proxy_params(policy, home_for_git), mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"git_status", "git_log"} <= names
        assert not names & {"git_add", "git_commit", "git_reset", "git_create_branch", "git_checkout"}
        log = await client.call_tool("git_log", {"repo_path": str(repo)})
        assert not log.is_error and "first" in log.content[0].text  # type: ignore[union-attr]
        for tool, args in (
            ("git_commit", {"repo_path": str(repo), "message": "x"}),
            ("git_add", {"repo_path": str(repo), "files": ["a.txt"]}),
            ("git_checkout", {"repo_path": str(repo), "branch_name": "main"}),
        ):
            denied = await client.call_tool(tool, args)
            assert denied.is_error and "not available through Gatekeeper" in denied.content[0].text  # type: ignore[union-attr]
    head = subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True).stdout
    assert head.count("\n") == 1


async def test_url_elicitation_hand_off_then_browser_approval(
    tmp_path: Path, stack_for: object, browser: object
) -> None:
    policy = write_policy(tmp_path)
    stack: Stack = stack_for(policy)  # type: ignore[operator]
    urls: list[str] = []

    async def on_elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        urls.append(params.url)
        pid = params.url.rsplit("/", 1)[1]
        status = await anyio.to_thread.run_sync(decide_in_browser, browser, stack, pid)
        assert status in ("approved", "committed")
        return types.ElicitResult(action="accept")

    async with Client(proxy_params(policy, stack.home), mode="auto", elicitation_callback=on_elicit) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("create_note", {"title": "Handed off", "body": "via the page\n"})
    assert len(urls) == 1 and urls[0].startswith(f"{stack.base}/proposals/")
    assert not result.is_error, result.content
    final_path = result.structured_content["final_path"]
    assert final_path.endswith("/workspace/notes/handed-off.md")
    assert Path(final_path).read_bytes() == b"via the page\n"


async def test_demo_notes_rejected_with_a_reason(tmp_path: Path, stack_for: object, browser: object) -> None:
    policy = write_policy(tmp_path)
    stack: Stack = stack_for(policy)  # type: ignore[operator]
    async with Client(proxy_params(policy, stack.home), mode="auto") as client:
        proposed = await client.call_tool("create_note", {"title": "Too soon", "body": "draft\n"})
        pid = proposed.structured_content["proposal_id"]
        reason = "not yet: put drafts under notes/drafts/"
        assert await anyio.to_thread.run_sync(decide_in_browser, browser, stack, pid, reason) == "rejected"
        status = await status_of(client, pid)
    assert status["status"] == "rejected" and status["reason"] == reason and status["reviewer"] == "alice"
    assert not (tmp_path / "workspace" / "notes" / "too-soon.md").exists()


async def test_old_sdk_server_list_read_resource_propose_approve_commit(
    tmp_path: Path, stack_for: object, browser: object
) -> None:
    """A FastMCP server on the Python SDK 1.x (mcp==1.6.0), behind the proxy in its default mode."""
    policy = old_notes_policy(tmp_path)
    notes = tmp_path / "workspace" / "notes"
    (notes / "seed.md").write_text("an old note\n")
    stack: Stack = stack_for(policy)  # type: ignore[operator]
    async with Client(proxy_params(policy, stack.home), mode="auto") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"read_note", "add_note", "gatekeeper_proposal_status"} <= names
        read = await client.call_tool("read_note", {"path": "notes/seed.md"})
        assert read.content[0].text == "an old note\n"  # type: ignore[union-attr]
        index = await client.read_resource("notes://index")
        assert [c.text for c in index.contents] == ["notes/seed.md"]  # type: ignore[union-attr]
        body = "written only after a person said yes\n"
        proposed = await client.call_tool("add_note", {"title": "Old SDK", "body": body})
        pid = proposed.structured_content["proposal_id"]
        target = notes / "old-sdk.md"
        assert not target.exists()
        assert await anyio.to_thread.run_sync(decide_in_browser, browser, stack, pid) in ("approved", "committed")
        assert wait_for_file(target) == body.encode()
        assert (await status_of(client, pid))["status"] == "committed"
        index = await client.read_resource("notes://index")
        assert index.contents[0].text.splitlines() == ["notes/old-sdk.md", "notes/seed.md"]  # type: ignore[union-attr]
    conn = sqlite3.connect(stack.home / "gatekeeper.db")
    starts = [row[0] for row in conn.execute("SELECT payload FROM audit_event WHERE kind = 'server_started'")]
    conn.close()
    assert starts and all('"mode":"legacy"' in payload for payload in starts), starts
