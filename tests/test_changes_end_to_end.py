"""Changes to existing files, end to end, every part real: Gatekeeper as a stdio subprocess driven by
the official MCP client in front of the REAL filesystem server (write_file over an existing file is a
replace, edit_file an edit) and the real obsidian-mcp (obsidian_edit_note append, obsidian_delete_note
a delete); the review app over real HTTP, read and approved in headless Chromium with the diff on
screen; the committer as ``python -m gatekeeper commit --once``; ``gatekeeper revert`` and
``gatekeeper audit verify`` as subprocesses. The files on disk end exactly as approved, the outcome
is applied/deleted (or conflict, with the other writer's bytes intact), and the agent learns it
through ``gatekeeper_proposal_status``.

One home, one review server, one proxy and one browser serve the whole module (each test works on
its own files), which keeps it near 20 s.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from gatekeeper.home import Home
from gatekeeper.store.store import Store
from tests.browser_support import logged_in_tab
from tests.helpers import make_home
from tests.obsidian_support import make_vault, obsidian_launch
from tests.peers.external import filesystem_server
from tests.proxy_support import proxied
from tests.review_support import PASSWORD, hashed, review_server

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
SHOTS = REPO / "test-output" / "test_changes_end_to_end"
LIMIT = 65536
NO_NEWLINE = "no newline at end of file"  # the marker's text, shown right after a last line without one


@dataclass
class World:
    """What the module shares: the home, the two trees the servers own, the policy, the review URL."""

    home: Home
    workspace: Path  # the filesystem server's allowed folder
    vault: Path  # obsidian-mcp's vault
    policy: Path
    base_url: str

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``python -m gatekeeper ARGS`` as a person runs it, against this module's home."""
        env = {k: v for k, v in os.environ.items() if k != "GATEKEEPER_POLICY"}
        env |= {"GATEKEEPER_HOME": str(self.home.path), "PYTHONPATH": str(REPO)}
        return subprocess.run(
            [sys.executable, "-m", "gatekeeper", *args], env=env, capture_output=True, text=True, timeout=120
        )

    def commit_once(self) -> dict[str, Any]:
        run = self.cli("commit", "--once", "--json", "--policy", str(self.policy))
        assert run.returncode in (0, 1), run.stdout + run.stderr
        assert "Traceback" not in run.stderr, run.stderr
        return {"code": run.returncode, "out": run.stdout, "err": run.stderr}

    def verify(self) -> None:
        """``gatekeeper audit verify --files``: the chain holds, and every committed destination is
        what its latest committed proposal left."""
        run = self.cli("audit", "verify", "--files")
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.startswith("OK: ") and " committed file(s) checked, 0 problem(s)" in run.stdout, run.stdout

    def outcome(self, pid: str) -> tuple[Any, ...]:
        conn = sqlite3.connect(self.home.db_path)
        try:
            row = conn.execute("SELECT outcome, detail FROM commit_record WHERE proposal_id = ?", (pid,)).fetchone()
        finally:
            conn.close()
        assert row is not None, f"no commit record for {pid}"
        return tuple(row)


def policy_text(world_ws: Path, vault: Path, base_url: str) -> str:
    command, env = obsidian_launch(vault)
    return (
        f"version: 1\nreview_url: {base_url}\nservers:\n"
        f"  files:\n    command: {filesystem_server()}\n    args: [{str(world_ws)!r}]\n"
        f"    workspace: {world_ws}\n    tools:\n      read_text_file: allow\n"
        "      write_file:\n        propose:\n          mode: replace\n"
        f"          path: {{arg: path}}\n          content: {{arg: content}}\n          max_bytes: {LIMIT}\n"
        "      edit_file:\n        propose:\n          mode: edit\n"
        f"          path: {{arg: path}}\n          max_bytes: {LIMIT}\n"
        "  obsidian:\n"
        f"    command: {json.dumps(command[0])}\n    args: {json.dumps(command[1:])}\n"
        f"    env: {json.dumps(env)}\n    workspace: {vault}\n    tools:\n"
        "      obsidian_read_note: allow\n"
        '      obsidian_edit_note:\n        propose:\n          mode: append\n          separator: "\\n"\n'
        "          path: {arg: path}\n          content: {arg: content}\n          globs: ['**/*.md']\n"
        "          when: {operation: append, vault: notes}\n"
        "      obsidian_delete_note:\n        propose:\n          mode: delete\n"
        "          path: {arg: path}\n          globs: ['**/*.md']\n          when: {vault: notes}\n"
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("e2e")
    home = make_home(root / "home")
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
    workspace = (root / "ws").resolve()
    (workspace / "notes").mkdir(parents=True)
    vault = make_vault(root / "vault")
    (vault / "daily").mkdir()
    policy = root / "policy.yaml"
    with review_server(home) as base_url:
        policy.write_text(policy_text(workspace, vault, base_url))
        yield World(home, workspace, vault, policy, base_url)


class Proxy:
    """The proxy session, kept open across the (synchronous) browser work on a portal's event loop."""

    def __init__(self, portal: BlockingPortal, client: Any) -> None:
        self.portal, self.client = portal, client

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        return self.portal.call(self.client.call_tool, tool, args)

    def propose(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        answer = self.call(tool, args)
        assert not answer.is_error, answer.content[0].text
        assert answer.content[0].text.startswith("Proposed, not written: "), answer.content[0].text
        s = answer.structured_content
        assert s["status"] == "pending_approval" and s["review_url"].endswith(f"/proposals/{s['proposal_id']}")
        return dict(s)

    def status(self, pid: str) -> tuple[str, dict[str, Any]]:
        answer = self.call("gatekeeper_proposal_status", {"proposal_id": pid})
        assert not answer.is_error, answer.content[0].text
        return answer.content[0].text, dict(answer.structured_content)


@pytest.fixture(scope="module")
def proxy(world: World) -> Iterator[Proxy]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(proxied(world.policy, world.home.path)) as client,
    ):
        yield Proxy(portal, client)


@pytest.fixture(scope="module")
def page(world: World) -> Iterator[Any]:
    """One logged-in Chromium tab for the module."""
    with logged_in_tab(world.base_url, SHOTS) as tab:
        yield tab


def rows_of(page: Any, css: str) -> list[list[str]]:
    found = page.locator(css)
    return [found.nth(i).locator("td").all_inner_texts() for i in range(found.count())]


def open_proposal(page: Any, world: World, pid: str) -> None:
    page.goto(f"{world.base_url}/proposals/{pid}")
    assert page.inner_text("#status") == "pending"


def approve(page: Any, world: World, pid: str) -> None:
    """Click approve and wait for the page it posts back to (polling the status, no sleeps)."""
    from playwright.sync_api import expect

    page.fill("#approve-password", PASSWORD)
    with page.expect_navigation():
        page.click("#approve")
    assert page.url == f"{world.base_url}/proposals/{pid}"
    expect(page.locator("#status")).to_have_text("approved")


def status_on_page(page: Any, world: World, pid: str) -> str:
    page.goto(f"{world.base_url}/proposals/{pid}")
    return str(page.inner_text("#status"))


def shot(page: Any, name: str) -> Path:
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_every_mode_through_real_servers_approved_in_chromium_and_committed(
    world: World, proxy: Proxy, page: Any
) -> None:
    ws, vault = world.workspace, world.vault
    plan_base = b"# Plan\nship on Monday\nowner: bob\n"
    plan_result = b"# Plan\nship on Friday\nowner: bob\nreviewed\n"
    log_base = b"# Log\r\nalpha\nbeta\ngamma\n"
    log_result = b"# Log\r\nalpha\nBETA\ngamma\n"
    day_base = b"# Day\nfirst line"
    day_result = b"# Day\nfirst line\nsecond line\n"
    old_base = b"# Old\nto be removed\n"
    (ws / "notes/plan.md").write_bytes(plan_base)
    (ws / "notes/log.md").write_bytes(log_base)
    (vault / "daily/day.md").write_bytes(day_base)
    (vault / "daily/old.md").write_bytes(old_base)
    os.chmod(ws / "notes/plan.md", 0o640)

    replace = proxy.propose("files__write_file", {"path": str(ws / "notes/plan.md"), "content": plan_result.decode()})
    edit = proxy.propose(
        "files__edit_file", {"path": "notes/log.md", "edits": [{"oldText": "beta", "newText": "BETA"}]}
    )
    append = proxy.propose(
        "obsidian__obsidian_edit_note",
        {"vault": "notes", "path": "daily/day.md", "operation": "append", "content": "second line\n"},
    )
    delete = proxy.propose("obsidian__obsidian_delete_note", {"vault": "notes", "path": "daily/old.md"})
    for s, mode, base, result in (
        (replace, "replace", plan_base, plan_result),
        (edit, "edit", log_base, log_result),
        (append, "append", day_base, day_result),
        (delete, "delete", old_base, b""),
    ):
        assert (s["mode"], s["base_sha256"], s["base_size"]) == (mode, sha(base), len(base))
        assert (s["sha256"], s["size"]) == (sha(result), len(result))
    # proposing wrote nothing: the servers never saw the calls
    assert (ws / "notes/plan.md").read_bytes() == plan_base and (vault / "daily/old.md").read_bytes() == old_base

    # replace: the diff, with line numbers on both sides
    open_proposal(page, world, replace["proposal_id"])
    assert "notes/plan.md" in page.inner_text("#mode-banner")
    assert rows_of(page, "#diff tr.removed") == [["2", "", "−", "ship on Monday"]]
    assert rows_of(page, "#diff tr.added") == [["", "2", "+", "ship on Friday"], ["", "4", "+", "reviewed"]]
    assert page.locator("#diff tr.removed").first.is_visible() and page.locator("#diff tr.added").first.is_visible()
    assert page.locator("#stale").count() == 0
    shot(page, "replace")
    approve(page, world, replace["proposal_id"])

    # edit: the CRLF line is context and stays as it is
    open_proposal(page, world, edit["proposal_id"])
    assert rows_of(page, "#diff tr.removed") == [["3", "", "−", "beta"]]
    assert rows_of(page, "#diff tr.added") == [["", "3", "+", "BETA"]]
    assert page.locator("#diff tr.added").first.is_visible()
    shot(page, "edit")
    approve(page, world, edit["proposal_id"])

    # append: the last line gains the separator, the new line follows
    open_proposal(page, world, append["proposal_id"])
    # the old last line had no newline: the page says so on that line
    assert rows_of(page, "#diff tr.removed") == [["2", "", "−", "first line" + NO_NEWLINE]]
    assert rows_of(page, "#diff tr.added") == [["", "2", "+", "first line"], ["", "3", "+", "second line"]]
    assert page.locator("#diff tr.added").last.is_visible()
    shot(page, "append")
    approve(page, world, append["proposal_id"])

    # delete: the bytes that will go
    open_proposal(page, world, delete["proposal_id"])
    assert "to be removed" in page.inner_text("#deleted")
    assert page.locator("#deleted").is_visible()
    assert f"Approve deleting these {len(old_base)} bytes at daily/old.md" in page.inner_text("#approve")
    shot(page, "delete")
    approve(page, world, delete["proposal_id"])

    run = world.commit_once()
    assert run["code"] == 0, run

    assert (ws / "notes/plan.md").read_bytes() == plan_result
    assert (ws / "notes/plan.md").stat().st_mode & 0o777 == 0o640  # the existing file's mode is kept
    assert (ws / "notes/log.md").read_bytes() == log_result
    assert (vault / "daily/day.md").read_bytes() == day_result
    assert not (vault / "daily/old.md").exists()
    assert world.outcome(replace["proposal_id"])[0] == "applied"
    assert world.outcome(edit["proposal_id"])[0] == "applied"
    assert world.outcome(append["proposal_id"])[0] == "applied"
    assert world.outcome(delete["proposal_id"])[0] == "deleted"
    assert status_on_page(page, world, replace["proposal_id"]) == "committed"

    for s, outcome in ((replace, "applied"), (edit, "applied"), (append, "applied"), (delete, "deleted")):
        text, status = proxy.status(s["proposal_id"])
        assert (status["status"], status["outcome"], status["mode"]) == ("committed", outcome, s["mode"]), status
        assert text.startswith(f"Proposal {s['proposal_id']} for {s['destination']}: committed: "), text
    # the agent reads the new note through the real server, via the proxy
    read = proxy.call("obsidian__obsidian_read_note", {"vault": "notes", "path": "daily/day.md"})
    assert read.structured_content["data"]["content"] == day_result.decode()

    world.verify()


def test_revert_of_an_applied_append_restores_the_exact_base(world: World, proxy: Proxy, page: Any) -> None:
    note = world.vault / "daily/revert.md"
    base = b"# Revert me\r\nkept line"
    note.write_bytes(base)
    append = proxy.propose(
        "obsidian__obsidian_edit_note",
        {"vault": "notes", "path": "daily/revert.md", "operation": "append", "content": "extra"},
    )
    open_proposal(page, world, append["proposal_id"])
    approve(page, world, append["proposal_id"])
    assert world.commit_once()["code"] == 0
    assert note.read_bytes() == b"# Revert me\r\nkept line\nextra"
    assert world.outcome(append["proposal_id"])[0] == "applied"

    run = world.cli("revert", append["proposal_id"], "--policy", str(world.policy), "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    undo = json.loads(run.stdout)
    assert (undo["mode"], undo["reverts"], undo["path"]) == ("replace", append["proposal_id"], "daily/revert.md")
    assert undo["sha256"] == sha(base) and undo["review_url"] == f"{world.base_url}/proposals/{undo['proposal_id']}"
    assert note.read_bytes() == b"# Revert me\r\nkept line\nextra"  # filing a revert writes nothing

    open_proposal(page, world, undo["proposal_id"])
    assert rows_of(page, "#diff tr.removed") == [["2", "", "−", "kept line"], ["3", "", "−", "extra" + NO_NEWLINE]]
    assert rows_of(page, "#diff tr.added") == [["", "2", "+", "kept line" + NO_NEWLINE]]
    shot(page, "revert")
    approve(page, world, undo["proposal_id"])
    assert world.commit_once()["code"] == 0
    assert note.read_bytes() == base
    assert world.outcome(undo["proposal_id"])[0] == "applied"
    _text, status = proxy.status(append["proposal_id"])
    assert status["status"] == "committed"  # the reverted proposal stays what it was

    world.verify()


def test_a_file_changed_after_the_proposal_ends_in_conflict_and_keeps_the_other_writers_bytes(
    world: World, proxy: Proxy, page: Any
) -> None:
    target = world.workspace / "notes/budget.md"
    target.write_bytes(b"budget: 100\n")
    s = proxy.propose("files__write_file", {"path": "notes/budget.md", "content": "budget: 200\n"})
    theirs = b"budget: 150 (set by carol)\n"
    target.write_bytes(theirs)  # another writer, after the proposal

    open_proposal(page, world, s["proposal_id"])
    assert "Changed since proposed: approving will end in conflict." in page.inner_text("#stale")
    assert page.locator("#stale").is_visible()
    assert rows_of(page, "#diff tr.removed") == [["1", "", "−", "budget: 100"]]  # the diff is still base → result
    shot(page, "conflict")
    approve(page, world, s["proposal_id"])

    world.commit_once()
    assert target.read_bytes() == theirs
    outcome, detail = world.outcome(s["proposal_id"])
    assert outcome == "conflict" and detail.startswith("changed since it was proposed: it now holds other bytes"), (
        detail
    )
    text, status = proxy.status(s["proposal_id"])
    assert (status["status"], status["outcome"], status["mode"]) == ("conflict", "conflict", "replace"), status
    assert status_on_page(page, world, s["proposal_id"]) == "conflict"
    assert "not written" in text, text

    world.verify()
