"""A note server reached over Streamable HTTP, end to end, every part real: the TypeScript-SDK vault
server (tests/peers/vault_http_server.mjs, stateless, a bearer token from its environment) behind
Gatekeeper by ``url`` with examples/http-vault.yaml as the policy; the proxy a stdio subprocess
driven by the official MCP client, the token in its environment; the review app over real HTTP,
read and decided in headless Chromium; the committer as ``python -m gatekeeper commit --once``.
An approved ``create_note`` is written by the committer with the exact bytes and read back through
the proxy from the server; the server's own ``create_note`` never runs (its log of tool calls says
so); a rejected one writes nothing; the token is in no file of Gatekeeper's home.

One home, review server, vault server, proxy and browser serve the module.
"""

from __future__ import annotations

import hashlib
import os
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
from tests.http_servers import proxied
from tests.http_support import HttpPeer, vault_server
from tests.review_support import PASSWORD, hashed, review_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parent.parent
SHOTS = REPO / "test-output" / "test_http_end_to_end"
EXAMPLE_URL, EXAMPLE_VAULT = "http://127.0.0.1:3000/mcp", "/home/you/vault"
TOKEN = "vault-token-8c1d2e"


@dataclass
class World:
    """What the module shares: the home, the vault server, the policy, the review URL."""

    home: Home
    vault: HttpPeer
    policy: Path
    base_url: str

    @property
    def root(self) -> Path:
        assert self.vault.root is not None
        return self.vault.root

    def commit_once(self) -> int:
        env = {k: v for k, v in os.environ.items() if k not in ("GATEKEEPER_POLICY", "VAULT_TOKEN")}
        env |= {"GATEKEEPER_HOME": str(self.home.path), "PYTHONPATH": str(REPO)}
        run = subprocess.run(
            [sys.executable, "-m", "gatekeeper", "commit", "--once", "--json", "--policy", str(self.policy)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stdout + run.stderr
        return run.returncode


def policy_text(url: str, vault: Path, base_url: str) -> str:
    """examples/http-vault.yaml itself, pointed at this server and vault: the example is what runs here."""
    example = (REPO / "examples" / "http-vault.yaml").read_text()
    assert EXAMPLE_URL in example and EXAMPLE_VAULT in example
    text = example.replace(EXAMPLE_URL, url).replace(EXAMPLE_VAULT, str(vault))
    return text.replace("version: 1\n", f"version: 1\nreview_url: {base_url}\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("http-e2e")
    home = make_home(root / "home")
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
    policy = root / "policy.yaml"
    with vault_server(root / "vault", root / "peers", token=TOKEN) as vault, review_server(home) as base_url:
        policy.write_text(policy_text(vault.url, vault.root or root, base_url))
        try:
            yield World(home, vault, policy, base_url)
        finally:
            print(vault.output())


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

    def status(self, pid: str) -> dict[str, Any]:
        answer = self.call("gatekeeper_proposal_status", {"proposal_id": pid})
        assert not answer.is_error, answer.content[0].text
        return dict(answer.structured_content)


@pytest.fixture(scope="module")
def proxy(world: World) -> Iterator[Proxy]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            proxied(world.policy, world.home.path, {"VAULT_TOKEN": TOKEN}, "auto")
        ) as client,
    ):
        yield Proxy(portal, client)


@pytest.fixture(scope="module")
def page(world: World) -> Iterator[Any]:
    """One logged-in Chromium tab for the module."""
    with logged_in_tab(world.base_url, SHOTS) as tab:
        yield tab


def decide(page: Any, world: World, pid: str, button: str, expected: str) -> None:
    """Click approve or reject on the proposal's page; wait for the page it posts back to."""
    from playwright.sync_api import expect

    if button == "#reject":
        page.fill("#reason", "not this note")
    else:
        page.fill("#approve-password", PASSWORD)  # step-up: a session cookie alone never approves
    with page.expect_navigation():
        page.click(button)
    assert page.url == f"{world.base_url}/proposals/{pid}"
    expect(page.locator("#status")).to_have_text(expected)


def text_of(result: Any) -> str:
    assert not result.is_error, result
    return str(result.content[0].text)


def test_create_note_is_proposed_approved_in_chromium_committed_and_read_back(
    world: World, proxy: Proxy, page: Any
) -> None:
    (world.root / "projects").mkdir(exist_ok=True)
    (world.root / "projects" / "garden.md").write_text("The Garden plan\n")
    found = proxy.call("search_notes", {"query": "garden"})
    assert found.structured_content == {"paths": ["projects/garden.md"]}, found
    assert text_of(proxy.call("read_note", {"path": "projects/garden.md"})) == "The Garden plan\n"

    body = "# Seeds\r\nbuy tomatoes 🍅\nand über-basil\n"
    s = proxy.propose("create_note", {"title": "seeds", "body": body})
    assert "mode" not in s and s["destination"] == "inbox/seeds.md", s  # a create
    assert s["sha256"] == hashlib.sha256(body.encode()).hexdigest()
    assert not (world.root / "inbox" / "seeds.md").exists()

    page.goto(f"{world.base_url}/proposals/{s['proposal_id']}")
    assert page.inner_text("#status") == "pending"
    shown = page.inner_text("body")
    assert "vault / create_note" in shown and "inbox/seeds.md" in shown and "buy tomatoes 🍅" in shown
    assert TOKEN not in page.content()
    page.screenshot(path=str(SHOTS / "proposal.png"), full_page=True)
    decide(page, world, s["proposal_id"], "#approve", "approved")

    assert world.commit_once() == 0
    assert (world.root / "inbox" / "seeds.md").read_bytes() == body.encode()
    assert proxy.status(s["proposal_id"])["status"] == "committed"
    assert text_of(proxy.call("read_note", {"path": "inbox/seeds.md"})) == body  # from the server, over HTTP
    # the server ran the reads; its own create_note never ran
    assert [c["tool"] for c in world.vault.tool_calls()] == ["search_notes", "read_note", "read_note"]
    assert world.vault.tool_calls("create_note") == []


def test_a_rejected_proposal_writes_nothing(world: World, proxy: Proxy, page: Any) -> None:
    s = proxy.propose("create_note", {"title": "unwanted", "body": "no\n"})
    page.goto(f"{world.base_url}/proposals/{s['proposal_id']}")
    decide(page, world, s["proposal_id"], "#reject", "rejected")
    assert world.commit_once() == 0
    assert not (world.root / "inbox" / "unwanted.md").exists()
    status = proxy.status(s["proposal_id"])
    assert status["status"] == "rejected", status
    assert world.vault.tool_calls("create_note") == []
    read = proxy.call("read_note", {"path": "inbox/unwanted.md"})
    assert read.is_error  # the server has no such note either


def test_the_token_reached_the_server_and_no_file_of_gatekeeper(world: World, proxy: Proxy) -> None:
    assert not proxy.call("search_notes", {"query": "x"}).is_error  # the server checks the token on every request
    leaked = [str(p) for p in world.home.path.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaked == []
    assert "refused" not in world.vault.stderr.read_text()  # no request went without the token
