"""A url server that misbehaves (tests/peers/hostile_http.py, a real HTTP server): every mode ends
in a tool error naming the server and what happened, within a bounded time; the proxy stays up
and its stdout stays JSON-RPC. Addresses the policy does not allow are refused with an event."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from gatekeeper.home import Home
from tests.helpers import budget
from tests.http_servers import free_port, loopback_alias, proxied, running
from tests.proxy_support import events

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
TIMEOUT = 3  # the policy's timeout for the hostile server, seconds
EXPECTED = {
    "html": "answered HTTP 200 with text/html",
    "500": "answered HTTP 500 Internal Server Error (text/html)",
    "redirect": "Redirect to http://127.0.0.2:",
    "huge": "over 10 MB",
    "sse": f"did not answer within {TIMEOUT} s",
    "slow": f"did not answer within {TIMEOUT} s",
}


def text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


def policy(tmp: Path, url: str, extra: str = "") -> Path:
    workspace = tmp / "ws"
    workspace.mkdir(exist_ok=True)
    body = f"""
    version: 1
    servers:
      hostile:
        url: {url}
        timeout: {TIMEOUT}s
        workspace: {workspace}
        tools: {{poke: allow}}
    """
    path = tmp / "policy.yaml"
    path.write_text(textwrap.dedent(body) + textwrap.indent(extra, "    "))
    return path


class Junk:
    """Collects anything the SDK client could not read as JSON-RPC on the proxy's stdout."""

    def __init__(self) -> None:
        self.seen: list[Exception] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.seen.append(message)


@pytest.mark.parametrize("mode", sorted(EXPECTED))
async def test_a_hostile_answer_is_a_clear_tool_error(tmp_path: Path, home: Home, mode: str) -> None:
    port = free_port()
    path = policy(tmp_path, f"http://127.0.0.1:{port}/mcp")
    junk = Junk()
    with running("tests.peers.hostile_http", mode, port=port):
        async with proxied(path, home.path, message_handler=junk) as p:
            assert [t.name for t in (await p.list_tools()).tools if t.name == "poke"] == ["poke"]
            began = time.monotonic()
            result = await p.call_tool("poke", {})
            took = time.monotonic() - began
            assert result.is_error and "'hostile'" in text(result), text(result)
            assert EXPECTED[mode] in text(result), text(result)
            assert took < budget(TIMEOUT + 5)
            assert [t.name for t in (await p.list_tools()).tools if t.name == "poke"] == ["poke"]  # still up
    assert junk.seen == []
    assert "Traceback" not in (home.path / "proxy-stderr.log").read_text()


@pytest.mark.parametrize(
    ("host", "address", "why", "hint"),
    [
        ("10.255.255.1", "10.255.255.1", "a private address", "allow_addresses: ['10.255.255.1']"),
        ("169.254.169.254", "169.254.169.254", "a cloud metadata address", "never connects to a cloud metadata"),
        (None, "127.0.0.1", "a loopback address", "allow_addresses: ['127."),
    ],
)
async def test_a_forbidden_address_is_refused_with_an_event(
    tmp_path: Path, home: Home, host: str | None, address: str, why: str, hint: str
) -> None:
    name = host or loopback_alias()
    path = policy(tmp_path, f"https://{name}/mcp", "allow_remote: true\n")
    async with proxied(path, home.path) as p:
        began = time.monotonic()
        result = await p.call_tool("poke", {})
        assert time.monotonic() - began < budget(10)  # refused before any connection attempt
    assert result.is_error and "'hostile'" in text(result) and why in text(result), text(result)
    assert hint in text(result)
    refused = [json.loads(e[2]) for e in events(home.path, "server_refused")]
    assert refused and refused[0]["server"] == "hostile" and refused[0]["address"].startswith(address[:3])


async def test_allow_addresses_lets_a_private_address_through(tmp_path: Path, home: Home) -> None:
    name = loopback_alias()
    port = free_port()
    path = policy(tmp_path, f"https://{name}:{port}/mcp", "allow_remote: true\nallow_addresses: ['127.0.0.0/8']\n")
    with running("tests.peers.hostile_http", "html", port=port):
        async with proxied(path, home.path) as p:
            result = await p.call_tool("poke", {})
    # The address is allowed, so the connection is tried, and TLS fails against a plain HTTP server.
    assert result.is_error and "'hostile'" in text(result) and "refused" not in text(result).split(":")[0]
    assert events(home.path, "server_refused") == []


async def test_the_proxy_ends_promptly_while_a_call_hangs(tmp_path: Path, home: Home) -> None:
    """The host leaves during a call the server never answers: the proxy still exits on EOF at once
    (the stdio client would SIGTERM it after 2 s)."""
    port = free_port()
    path = policy(tmp_path, f"http://127.0.0.1:{port}/mcp")
    path.write_text(path.read_text().replace(f"timeout: {TIMEOUT}s", "timeout: 600s"))
    with running("tests.peers.hostile_http", "slow", port=port):
        async with proxied(path, home.path) as p:
            assert [t.name for t in (await p.list_tools()).tools if t.name == "poke"] == ["poke"]
            with anyio.move_on_after(1):  # the host gives up waiting; the call stays open at the server
                await p.call_tool("poke", {})
            began = time.monotonic()
        took = time.monotonic() - began
    assert took < budget(2), f"the proxy took {took:.1f} s to exit"
