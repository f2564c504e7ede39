"""The real Streamable HTTP peers of issue 13 are real and behave, driven directly by the official Python client.

Gatekeeper's HTTP tests lean on these servers: the TypeScript-SDK vault server (tests/peers/vault_http_server.mjs,
stateless, exclusive create) and server-everything in its ``streamableHttp`` mode. If one of them drifts (a new
pin, a changed SDK), these tests say so before a proxy test fails for a reason that is not the proxy's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import TextContent

from tests.http_support import HttpPeer, everything, everything_http, vault_http, vault_server
from tests.process_support import alive, wait_gone

__all__ = ["everything_http", "vault_http"]  # fixtures, used by name below

pytestmark = pytest.mark.anyio

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def connected(url: str, mode: str = "auto", headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client,
    ):
        yield client


def text_of(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    assert content and isinstance(content[0], TextContent), content
    return content[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_vault_create_note_is_exclusive(vault_http: HttpPeer, mode: str) -> None:
    async with connected(vault_http.url, mode) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"create_note", "search_notes", "read_note"}
        first = await client.call_tool("create_note", {"title": "hello", "body": "first body"})
        assert not first.is_error and text_of(first) == "inbox/hello.md"
        again = await client.call_tool("create_note", {"title": "hello", "body": "second body"})
    assert again.is_error and "already exists" in text_of(again)
    assert (vault_http.root / "inbox" / "hello.md").read_text() == "first body"  # type: ignore[operator]
    assert [c["args"]["body"] for c in vault_http.tool_calls("create_note")] == ["first body", "second body"]


async def test_vault_search_and_read(vault_http: HttpPeer) -> None:
    root = vault_http.root
    assert root is not None
    (root / "projects").mkdir()
    (root / "projects" / "plan.md").write_text("The Garden plan\n")
    (root / "projects" / "other.md").write_text("nothing here\n")
    async with connected(vault_http.url) as client:
        found = await client.call_tool("search_notes", {"query": "garden"})
        assert found.structured_content == {"paths": ["projects/plan.md"]}
        read = await client.call_tool("read_note", {"path": "projects/plan.md"})
        assert not read.is_error and text_of(read) == "The Garden plan\n"
    assert [c["tool"] for c in vault_http.tool_calls()] == ["search_notes", "read_note"]


async def test_vault_read_note_refuses_paths_outside(vault_http: HttpPeer, tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("not yours")
    assert vault_http.root is not None
    (vault_http.root / "escape.md").symlink_to(tmp_path / "secret.md")
    async with connected(vault_http.url) as client:
        for path in ("../secret.md", str(tmp_path / "secret.md"), "escape.md"):
            result = await client.call_tool("read_note", {"path": path})
            assert result.is_error and "outside the vault" in text_of(result), (path, result)
            assert "not yours" not in text_of(result)


async def test_vault_is_stateless_and_refuses_get_and_delete(vault_http: HttpPeer) -> None:
    async with httpx2.AsyncClient() as http:
        init = await http.post(vault_http.url, json=INIT, headers=ACCEPT)
        assert init.status_code == 200 and "mcp-session-id" not in init.headers
        assert init.headers["content-type"].startswith("text/event-stream")  # the SDK's default answer
        for method in ("GET", "DELETE"):
            refused = await http.request(method, vault_http.url, headers=ACCEPT)
            assert refused.status_code == 405, (method, refused.text)


async def test_vault_json_answers(tmp_path: Path) -> None:
    with vault_server(tmp_path / "vault", tmp_path / "logs", json_responses=True) as peer:
        async with httpx2.AsyncClient() as http:
            init = await http.post(peer.url, json=INIT, headers=ACCEPT)
        assert init.status_code == 200 and init.headers["content-type"].startswith("application/json")
        assert init.json()["result"]["serverInfo"]["name"] == "vault-http"
        async with connected(peer.url) as client:
            created = await client.call_tool("create_note", {"title": "j", "body": "json"})
        assert text_of(created) == "inbox/j.md" and (tmp_path / "vault" / "inbox" / "j.md").read_text() == "json"


async def test_vault_token_is_checked(tmp_path: Path) -> None:
    with vault_server(tmp_path / "vault", tmp_path / "logs", token="s3cret") as peer:
        async with httpx2.AsyncClient() as http:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                refused = await http.post(peer.url, json=INIT, headers={**ACCEPT, **headers})
                assert refused.status_code == 401, (headers, refused.text)
        with pytest.raises(BaseException) as caught:  # the SDK raises the 401 inside its task groups
            async with connected(peer.url, "legacy"):
                pass
        assert "Unauthorized" in repr(caught.value)
        async with connected(peer.url, headers={"Authorization": "Bearer s3cret"}) as client:
            created = await client.call_tool("create_note", {"title": "t", "body": "with token"})
        assert not created.is_error
        assert [c["tool"] for c in peer.tool_calls()] == ["create_note"]  # the refused requests ran nothing


async def test_everything_lists_and_echoes(everything_http: HttpPeer) -> None:
    async with connected(everything_http.url) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"echo", "trigger-long-running-operation", "get-sum"} <= tools
        echoed = await client.call_tool("echo", {"message": "über 🙂"})
        assert text_of(echoed) == "Echo: über 🙂"
        resources = (await client.list_resources()).resources
        assert resources, "server-everything lists resources"
        read = await client.read_resource(str(resources[0].uri))
        assert read.contents and str(read.contents[0].uri) == str(resources[0].uri)
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert {"simple-prompt", "args-prompt"} <= prompts
        prompt = await client.get_prompt("args-prompt", {"city": "Lyon"})
        assert "Lyon" in prompt.messages[0].content.text  # type: ignore[union-attr]


async def test_everything_reports_progress(everything_http: HttpPeer) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with connected(everything_http.url, "legacy") as client:
        result = await client.call_tool(
            "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress
        )
    assert not result.is_error, result
    assert seen == [(1, 3), (2, 3), (3, 3)]


async def test_vault_has_no_other_writing_tool(vault_http: HttpPeer) -> None:
    """A tool the server does not have is an error result naming it; the server runs nothing and stays up."""
    async with connected(vault_http.url) as client:
        unknown = await client.call_tool("delete_note", {"path": "x"})
        assert unknown.is_error and "delete_note" in text_of(unknown)
        assert not (await client.call_tool("search_notes", {"query": "x"})).is_error
    assert [c["tool"] for c in vault_http.tool_calls()] == ["search_notes"]


async def test_servers_stop_with_their_context(tmp_path: Path) -> None:
    """tests/http_support.py leaves nothing running: the server's process group ends with the block."""
    with vault_server(tmp_path / "vault", tmp_path / "logs") as vault, everything(tmp_path / "logs") as every:
        pids = {vault.process.pid, every.process.pid}
        assert all(alive(pid) for pid in pids)
        assert vault.url != every.url
    wait_gone(pids, timeout=10)
    assert vault.process.returncode is not None and every.process.returncode is not None
