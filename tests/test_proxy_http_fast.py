"""The fast path to a url server (proxy/httpcarrier.py): an allowed call is one raw POST, observed from both ends.

A raw host (lines on the proxy's stdin and stdout) in front of tests/peers/stateful_http_server.py run
with ``--record``: every HTTP exchange it had (headers, request, answer as sent) is a JSON line in a
file. A request id ``gatekeeper-fast-N`` at the server shows the raw path was taken (the SDK client's
ids are integers); the server's own answer bytes at the host show nothing re-serialised them. Where
something goes wrong, the host gets what the SDK path (``GATEKEEPER_FAST_PATH=0``) gives.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gatekeeper.home import Home
from tests.http_servers import free_port, running, start, stop
from tests.http_support import vault_server
from tests.proxy_support import proxy_params
from tests.test_proxy_fastpath import answer_line, call, wait_until
from tests.test_proxy_wire import RawProxy

pytestmark = pytest.mark.timeout(120)
SERVER = "tests.peers.stateful_http_server"
TOKEN = "fast-token-5c2e"
FAST = re.compile(r"^gatekeeper-fast-[0-9]+$")


def policy(tmp: Path, url: str, timeout: int = 10) -> Path:
    workspace = tmp / "vault"
    workspace.mkdir(exist_ok=True)
    (workspace / "hello.md").write_text("# Hello\n")
    body = f"""
    version: 1
    servers:
      vault:
        url: {url}
        timeout: {timeout}s
        workspace: {workspace}
        headers: {{Authorization: {{env: VAULT_TOKEN, prefix: "Bearer "}}}}
        tools:
          read_note: allow
          steps: allow
          wait: allow
          whoami: allow
          poke: allow
          erase_all: deny
          create_note:
            propose:
              path: {{arg: name}}
              content: {{arg: body}}
    """
    path = tmp / "policy.yaml"
    path.write_text(textwrap.dedent(body))
    return path


class HttpHost(RawProxy):
    """``RawProxy`` with the downstream era and the environment of these tests."""

    def __init__(self, policy: Path, home: Path, mode: str, fast: bool) -> None:
        params = proxy_params(policy, home, "--downstream-mode", mode)
        env = {**(params.env or {}), "PATH": "/usr/bin:/bin", "VAULT_TOKEN": TOKEN}
        env["GATEKEEPER_FAST_PATH"] = "1" if fast else "0"
        self.stderr = open(home / "raw-stderr.log", "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            cwd=params.cwd,
        )
        self.lines: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()


@contextmanager
def raw_host(path: Path, home: Home, mode: str = "legacy", fast: bool = True) -> Iterator[HttpHost]:
    """The proxy after the host's 2025-11-25 handshake and a tools/list (what the fast path waits for)."""
    proxy = HttpHost(path, home.path, mode, fast)
    try:
        info = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        proxy.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": info})
        assert "result" in proxy.wait_for("init")
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        assert "result" in proxy.wait_for("list"), proxy.lines
        yield proxy
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def serve(tmp: Path, port: int, *extra: str) -> Any:
    args = [str(tmp / "vault"), "--token-env", "VAULT_TOKEN", "--record", str(tmp / "record.jsonl"), *extra]
    return running(SERVER, *args, port=port, env={"VAULT_TOKEN": TOKEN})


def exchanges(tmp: Path, method: str | None = None) -> list[dict[str, Any]]:
    """What the server received and answered, in order; each with its request parsed as ``message``."""
    path = tmp / "record.jsonl"
    found = []
    for line in path.read_text().splitlines() if path.exists() else []:
        record = json.loads(line)
        record["message"] = json.loads(record["body"]) if record["body"] else {}
        if method is None or record["message"].get("method") == method:
            found.append(record)
    return found


def tool_calls(tmp: Path, name: str) -> list[dict[str, Any]]:
    return [r for r in exchanges(tmp, "tools/call") if r["message"]["params"]["name"] == name]


def answer_bytes(record: dict[str, Any]) -> bytes:
    """The server's response message exactly as it sent it (a JSON body, or the SSE event that carries it)."""
    text = record["response"]
    if text.startswith("{"):  # a JSON body
        return text.encode()
    for line in text.splitlines():
        if line.startswith("data:"):
            data = line[5:].lstrip(" ")
            message = json.loads(data)
            if "id" in message and "method" not in message:
                return data.encode()
    raise AssertionError(f"no response in {text[:300]!r}")


@pytest.mark.parametrize("answers", ["sse", "json"])
def test_an_allowed_call_is_one_raw_post_answered_with_the_servers_bytes(
    tmp_path: Path, home: Home, answers: str
) -> None:
    port = free_port()
    with serve(tmp_path, port, *(["--json"] if answers == "json" else [])):
        with raw_host(policy(tmp_path, f"http://127.0.0.1:{port}/mcp"), home) as proxy:
            proxy.send(call(41, "read_note", {"name": "hello.md"}))
            line = answer_line(proxy, 41)
        listed = exchanges(tmp_path, "tools/list")[-1]
        [post] = tool_calls(tmp_path, "read_note")
    ours = post["message"]["id"]
    assert isinstance(ours, str) and FAST.match(ours), f"the SDK path was taken: id {ours!r}"
    server = answer_bytes(post)
    assert server.count(json.dumps(ours).encode()) == 1
    assert line.rstrip(b"\n") == server.replace(json.dumps(ours).encode(), b"41")
    # The same session, version and secret header the SDK transport sends; the SDK client's arguments.
    for header in ("mcp-session-id", "mcp-protocol-version", "authorization", "accept", "content-type"):
        assert post["headers"].get(header) == listed["headers"].get(header), header
    assert post["headers"]["authorization"] == f"Bearer {TOKEN}" and post["headers"]["mcp-session-id"]
    assert post["message"]["params"] == {"name": "read_note", "arguments": {"name": "hello.md"}}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_progress_and_logs_on_the_event_stream_come_before_the_answer(tmp_path: Path, home: Home, mode: str) -> None:
    port = free_port()
    with serve(tmp_path, port):
        with raw_host(policy(tmp_path, f"http://127.0.0.1:{port}/mcp"), home, mode) as proxy:
            proxy.send(call("s", "steps", {"n": 3}, progressToken="tok"))
            answer_line(proxy, "s")
            lines = [json.loads(line) for line in proxy.lines]
        [post] = tool_calls(tmp_path, "steps")
    assert FAST.match(post["message"]["id"]), post["message"]["id"]
    assert post["headers"]["accept"] == "application/json, text/event-stream"
    end = next(i for i, m in enumerate(lines) if m.get("id") == "s")
    progress = [m["params"] for m in lines[:end] if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [("tok", i, 3) for i in (1, 2, 3)]
    logs = [m["params"]["data"] for m in lines[:end] if m.get("method") == "notifications/message"]
    assert logs == ["log line 1", "log line 2", "log line 3"]
    assert lines[end]["result"]["structuredContent"] == {"result": 3}


def test_proposed_and_denied_tools_never_reach_the_server(tmp_path: Path, home: Home) -> None:
    port = free_port()
    with serve(tmp_path, port), raw_host(policy(tmp_path, f"http://127.0.0.1:{port}/mcp"), home) as proxy:
        proxy.send(call(1, "create_note", {"name": "new.md", "body": "hi"}))
        proxy.send(call(2, "erase_all", {}))
        proxy.send(call(3, "read_note", {"name": "hello.md"}))
        proposed, denied = proxy.wait_for(1), proxy.wait_for(2)
        proxy.wait_for(3)
    assert "proposal" in json.dumps(proposed).lower() and denied["result"]["isError"] is True
    assert tool_calls(tmp_path, "create_note") == [] and tool_calls(tmp_path, "erase_all") == []
    assert [FAST.match(r["message"]["id"]) is not None for r in tool_calls(tmp_path, "read_note")] == [True]


def test_a_forgotten_session_sends_the_call_the_sdk_way(tmp_path: Path, home: Home) -> None:
    """The server restarted: the raw POST gets 404 for the old session, so the call goes the SDK way,
    which opens a new session and sends it there; the host just gets its answer."""
    port = free_port()
    path = policy(tmp_path, f"http://127.0.0.1:{port}/mcp")
    args = [str(tmp_path / "vault"), "--token-env", "VAULT_TOKEN", "--record", str(tmp_path / "record.jsonl")]
    env = {"VAULT_TOKEN": TOKEN}
    server = start(SERVER, *args, port=port, env=env)
    try:
        with raw_host(path, home) as proxy:
            proxy.send(call(1, "whoami"))
            assert proxy.wait_for(1)["result"]["structuredContent"] == {"result": server.pid}
            stop(server)
            server = start(SERVER, *args, port=port, env=env)
            proxy.send(call(2, "whoami"))
            again = proxy.wait_for(2)
            assert again["result"]["structuredContent"] == {"result": server.pid}, again
    finally:
        stop(server)
    calls = tool_calls(tmp_path, "whoami")
    assert [FAST.match(str(r["message"]["id"])) is not None for r in calls][:2] == [True, True]
    assert calls[1]["status"] == 404 and calls[-1]["status"] == 200
    assert isinstance(calls[-1]["message"]["id"], int)  # the SDK client's, on the new session
    assert "ended our session" in (home.path / "logs" / "vault.log").read_text()


HOSTILE = ["html", "500", "huge", "redirect", "sse", "slow", "down"]


@pytest.mark.parametrize("mode", HOSTILE)
def test_a_failing_exchange_gets_the_sdk_paths_answer(tmp_path: Path, home: Home, mode: str) -> None:
    """Each way an HTTP exchange fails: the host's answer is the one the SDK path gives (same words)."""
    port = free_port()
    path = policy(tmp_path, f"http://127.0.0.1:{port}/mcp", timeout=2)
    answers = {}
    for fast in (True, False):
        with (
            running("tests.peers.hostile_http", "html" if mode == "down" else mode, port=port) as server,
            raw_host(path, home, fast=fast) as proxy,
        ):
            if mode == "down":  # gone after the handshake and the listing: a connection refused
                stop(server)
            began = time.monotonic()
            proxy.send(call(7, "poke"))
            answers[fast] = proxy.wait_for(7)
            assert time.monotonic() - began < 2 + 5
            proxy.send({"jsonrpc": "2.0", "id": "after", "method": "tools/list"})
            assert proxy.wait_for("after")  # still up (a server that is down makes it an error)
    assert answers[True] == answers[False], answers
    assert answers[True]["result"]["isError"] is True and "'vault'" in json.dumps(answers[True])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_hosts_cancellation_reaches_the_servers_handler(tmp_path: Path, home: Home, mode: str) -> None:
    """2025: ``notifications/cancelled`` for our id is POSTed; 2026: the POST is aborted (no notice)."""
    port = free_port()
    started, cancelled = tmp_path / "started", tmp_path / "cancelled"
    args = {"seconds": 600, "started": str(started), "cancelled": str(cancelled)}
    with serve(tmp_path, port):
        with raw_host(policy(tmp_path, f"http://127.0.0.1:{port}/mcp"), home, mode) as proxy:
            proxy.send(call("w", "wait", args))
            wait_until(started.exists, "the server to receive the call")
            proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w"}})
            wait_until(cancelled.exists, "the cancellation to reach the server's handler")
            proxy.send(call("after", "read_note", {"name": "hello.md"}))
            assert "result" in proxy.wait_for("after")
            assert not [line for line in proxy.lines if json.loads(line).get("id") == "w"]
        # Each exchange is recorded once it ends (the proxy is gone now, so every one has).
        [post] = wait_until(lambda: tool_calls(tmp_path, "wait"), "the server to record the call")
        if mode == "legacy":
            wait_until(lambda: exchanges(tmp_path, "notifications/cancelled"), "the notice to be recorded")
        notices = exchanges(tmp_path, "notifications/cancelled")
    ours = post["message"]["id"]
    assert FAST.match(ours), ours
    if mode == "legacy":
        assert [n["message"]["params"]["requestId"] for n in notices] == [ours]
        assert notices[0]["headers"]["mcp-session-id"] == post["headers"]["mcp-session-id"]
    else:
        assert notices == []


@pytest.mark.parametrize("json_answers", [False, True])
def test_the_typescript_vault_servers_answer_reaches_the_host_as_it_sent_it(
    tmp_path: Path, home: Home, json_answers: bool
) -> None:
    """The issue's vault server (TypeScript SDK, stateless): the host's line is the server's own answer
    to the same request sent directly, byte for byte (the SDK path would re-serialise it)."""
    vault = tmp_path / "vault"
    (vault / "notes").mkdir(parents=True)
    (vault / "notes" / "small.md").write_text("A small note.\n")
    with vault_server(vault, tmp_path / "peers", json_responses=json_answers) as peer:
        request = call(41, "read_note", {"path": "notes/small.md"})
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
        direct = httpx2.post(peer.url, json=request, headers=headers, timeout=30)
        expected = answer_bytes({"response": direct.text})
        with raw_host(policy(tmp_path, peer.url), home) as proxy:
            proxy.send(request)
            line = answer_line(proxy, 41)
        assert [c["args"] for c in peer.tool_calls("read_note")] == [{"path": "notes/small.md"}] * 2
    assert b'"id":41' in expected and line.rstrip(b"\n") == expected


def test_resource_reads_and_prompts_go_raw_too(tmp_path: Path, home: Home) -> None:
    port = free_port()
    with serve(tmp_path, port), raw_host(policy(tmp_path, f"http://127.0.0.1:{port}/mcp"), home) as proxy:
        proxy.send({"jsonrpc": "2.0", "id": "r", "method": "resources/read", "params": {"uri": "note://hello"}})
        prompt = {"name": "summarize", "arguments": {"name": "hello.md"}}
        proxy.send({"jsonrpc": "2.0", "id": "p", "method": "prompts/get", "params": prompt})
        lines = {rid: answer_line(proxy, rid) for rid in ("r", "p")}
    for method, rid in (("resources/read", "r"), ("prompts/get", "p")):
        [post] = exchanges(tmp_path, method)
        ours = post["message"]["id"]
        assert FAST.match(str(ours)), (method, ours)
        assert lines[rid].rstrip(b"\n") == answer_bytes(post).replace(
            json.dumps(ours).encode(), json.dumps(rid).encode()
        )
    assert b"# Hello" in lines["r"] and b"Summarize the note hello.md." in lines["p"]
