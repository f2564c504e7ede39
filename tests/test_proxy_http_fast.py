"""The fast path to a url server (servers/url/carrier.py): an allowed call is one raw POST, observed from both ends.

A raw host (lines on the proxy's stdin and stdout) in front of tests/peers/stateful_http_server.py run
with ``--record``: every HTTP exchange it had (headers, request, answer as sent) is a JSON line in a
file. A request id ``gatekeeper-fast-N`` at the server shows the raw path was taken (the SDK client's
ids are integers); the server's own answer bytes at the host show nothing re-serialised them. Where
something goes wrong, the host gets what the SDK path (``GATEKEEPER_FAST_PATH=0``) gives.

Starting a server costs ~2 s and a proxy ~2.5 s, so they are shared where nothing leaks: one stateful
server per answer style for the module, each test on its own URL (``/TAG/mcp``), so with its own
sessions and its own record file; and one proxy per path (fast, SDK) in front of one hostile server
per failure mode, each test calling its own mode's server with its own request ids.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gatekeeper.home import Home
from tests.helpers import make_home
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


def handshake(proxy: HttpHost) -> None:
    """The host's 2025-11-25 handshake and a tools/list (what the fast path waits for)."""
    info = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    proxy.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": info})
    assert "result" in proxy.wait_for("init")
    proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
    assert "result" in proxy.wait_for("list"), proxy.lines


@contextmanager
def raw_hosts(path: Path, home: Home, mode: str = "legacy", fast: Sequence[bool] = (True,)) -> Iterator[list[HttpHost]]:
    """One proxy per entry of ``fast`` (its path), all started at once, each after ``handshake``."""
    proxies: list[HttpHost] = []
    try:
        proxies.extend(HttpHost(path, home.path, mode, f) for f in fast)
        for proxy in proxies:
            handshake(proxy)
        yield proxies
        for proxy in proxies:
            proxy.assert_stdout_is_jsonrpc()
    finally:
        for proxy in proxies:
            proxy.close()


@contextmanager
def raw_host(path: Path, home: Home, mode: str = "legacy", fast: bool = True) -> Iterator[HttpHost]:
    with raw_hosts(path, home, mode, (fast,)) as [proxy]:
        yield proxy


@dataclass(frozen=True)
class Vault:
    """One test's stateful server: its own URL (a tag in the path) and the file its exchanges go to."""

    url: str
    record: Path


class Vaults:
    """The module's stateful servers, one per answer style (SSE, JSON), started on first use. Each
    ``vault()`` is a new tag: the proxy's sessions there and the record file are that test's alone."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ports: dict[bool, int] = {}
        self.servers = ExitStack()

    def vault(self, json_answers: bool = False) -> Vault:
        if json_answers not in self.ports:
            port = free_port()
            extra = ["--json"] if json_answers else []
            self.servers.enter_context(serve(self.folder, port, *extra))
            self.ports[json_answers] = port
        tag = f"t{uuid.uuid4().hex[:12]}"
        url = f"http://127.0.0.1:{self.ports[json_answers]}/{tag}/mcp"
        return Vault(url, self.folder / "records" / f"{tag}.jsonl")


@pytest.fixture(scope="module")
def vaults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vaults]:
    shared = Vaults(tmp_path_factory.mktemp("vaults"))
    with shared.servers:
        yield shared


def serve(tmp: Path, port: int, *extra: str) -> Any:
    """The stateful server over ``tmp/vault``, recording into ``tmp/records`` (one file per URL tag)."""
    (tmp / "vault").mkdir(exist_ok=True)
    (tmp / "vault" / "hello.md").write_text("# Hello\n")
    args = [str(tmp / "vault"), "--token-env", "VAULT_TOKEN", "--record", str(tmp / "records"), *extra]
    return running(SERVER, *args, port=port, env={"VAULT_TOKEN": TOKEN})


def exchanges(record: Path, method: str | None = None) -> list[dict[str, Any]]:
    """What the server received and answered, in order; each with its request parsed as ``message``."""
    found = []
    for line in record.read_text().splitlines() if record.exists() else []:
        entry = json.loads(line)
        entry["message"] = json.loads(entry["body"]) if entry["body"] else {}
        if method is None or entry["message"].get("method") == method:
            found.append(entry)
    return found


def tool_calls(record: Path, name: str) -> list[dict[str, Any]]:
    return [r for r in exchanges(record, "tools/call") if r["message"]["params"]["name"] == name]


def recorded(record: Path, name: str) -> list[dict[str, Any]]:
    """The calls of ``name``, once there is one: the server writes an exchange down just after it ends."""
    found: list[dict[str, Any]] = wait_until(lambda: tool_calls(record, name), f"a recorded {name} call")
    return found


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
    tmp_path: Path, home: Home, vaults: Vaults, answers: str
) -> None:
    vault = vaults.vault(json_answers=answers == "json")
    with raw_host(policy(tmp_path, vault.url), home) as proxy:
        proxy.send(call(41, "read_note", {"name": "hello.md"}))
        line = answer_line(proxy, 41)
    listed = exchanges(vault.record, "tools/list")[-1]
    [post] = recorded(vault.record, "read_note")
    ours = post["message"]["id"]
    assert isinstance(ours, str) and FAST.match(ours), f"the SDK path was taken: id {ours!r}"
    server = answer_bytes(post)
    assert server.count(json.dumps(ours).encode()) == 1
    assert line.rstrip(b"\n") == server.replace(json.dumps(ours).encode(), b"41")
    # The same session, version and secret header the SDK transport sends; the SDK client's arguments.
    for header in ("mcp-session-id", "mcp-protocol-version", "authorization", "accept", "content-type"):
        assert post["headers"].get(header) == listed["headers"].get(header), header
    assert post["headers"]["authorization"] == f"Bearer {TOKEN}" and post["headers"]["mcp-session-id"]
    # On the proxy's own kept-alive connection (proxy/servers/url/http.py), not httpx2's, which asks for gzip.
    assert "accept-encoding" not in post["headers"] and "accept-encoding" in listed["headers"]
    assert post["message"]["params"] == {"name": "read_note", "arguments": {"name": "hello.md"}}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_progress_and_logs_on_the_event_stream_come_before_the_answer(
    tmp_path: Path, home: Home, vaults: Vaults, mode: str
) -> None:
    vault = vaults.vault()
    with raw_host(policy(tmp_path, vault.url), home, mode) as proxy:
        proxy.send(call("s", "steps", {"n": 3}, progressToken="tok"))
        answer_line(proxy, "s")
        lines = [json.loads(line) for line in proxy.lines]
    [post] = recorded(vault.record, "steps")
    assert FAST.match(post["message"]["id"]), post["message"]["id"]
    assert post["headers"]["accept"] == "application/json, text/event-stream"
    end = next(i for i, m in enumerate(lines) if m.get("id") == "s")
    progress = [m["params"] for m in lines[:end] if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [("tok", i, 3) for i in (1, 2, 3)]
    logs = [m["params"]["data"] for m in lines[:end] if m.get("method") == "notifications/message"]
    assert logs == ["log line 1", "log line 2", "log line 3"]
    assert lines[end]["result"]["structuredContent"] == {"result": 3}


def test_proposed_and_denied_tools_never_reach_the_server(tmp_path: Path, home: Home, vaults: Vaults) -> None:
    vault = vaults.vault()
    with raw_host(policy(tmp_path, vault.url), home) as proxy:
        proxy.send(call(1, "create_note", {"name": "new.md", "body": "hi"}))
        proxy.send(call(2, "erase_all", {}))
        proxy.send(call(3, "read_note", {"name": "hello.md"}))
        proposed, denied = proxy.wait_for(1), proxy.wait_for(2)
        proxy.wait_for(3)
    assert "proposal" in json.dumps(proposed).lower() and denied["result"]["isError"] is True
    assert [FAST.match(r["message"]["id"]) is not None for r in recorded(vault.record, "read_note")] == [True]
    assert tool_calls(vault.record, "create_note") == [] and tool_calls(vault.record, "erase_all") == []


def test_a_forgotten_session_sends_the_call_the_sdk_way(tmp_path: Path, home: Home) -> None:
    """The server restarted: the raw POST gets 404 for the old session, so the call goes the SDK way,
    which opens a new session and sends it there; the host just gets its answer."""
    port = free_port()
    path = policy(tmp_path, f"http://127.0.0.1:{port}/mcp")
    args = [str(tmp_path / "vault"), "--token-env", "VAULT_TOKEN", "--record", str(tmp_path / "records")]
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
    calls = tool_calls(tmp_path / "records" / "record.jsonl", "whoami")
    assert [FAST.match(str(r["message"]["id"])) is not None for r in calls][:2] == [True, True]
    assert calls[1]["status"] == 404 and calls[-1]["status"] == 200
    assert isinstance(calls[-1]["message"]["id"], int)  # the SDK client's, on the new session
    assert "ended our session" in (home.path / "logs" / "vault.log").read_text()


HOSTILE = ["html", "500", "huge", "redirect", "sse", "slow", "down"]
HOSTILE_TIMEOUT = 2  # the policy's timeout for each hostile server, seconds


@dataclass
class Hostile:
    """One hostile server per mode (``down``: an ``html`` one its test stops) and two proxies in front
    of them all: ``hosts[True]`` takes the fast path, ``hosts[False]`` the SDK path."""

    servers: dict[str, subprocess.Popen[bytes]]
    hosts: dict[bool, HttpHost]


def hostile_policy(folder: Path, ports: dict[str, int]) -> Path:
    workspace = folder / "workspace"
    workspace.mkdir(exist_ok=True)
    lines = ["version: 1", "servers:"]
    for mode, port in ports.items():
        lines += [f"  hostile_{mode}:", f"    url: http://127.0.0.1:{port}/mcp", f"    timeout: {HOSTILE_TIMEOUT}s"]
        lines += [f"    workspace: {workspace}", "    tools: {poke: allow}"]
    path = folder / "policy.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    folder = tmp_path_factory.mktemp("hostile")
    with ExitStack() as stack:
        ports = {mode: free_port() for mode in HOSTILE}
        servers = {
            mode: stack.enter_context(
                running("tests.peers.hostile_http", "html" if mode == "down" else mode, port=port)
            )
            for mode, port in ports.items()
        }
        path, home = hostile_policy(folder, ports), make_home(folder / "home")
        fast, slow = stack.enter_context(raw_hosts(path, home, fast=(True, False)))
        yield Hostile(servers, {True: fast, False: slow})


@pytest.mark.parametrize("mode", HOSTILE)
def test_a_failing_exchange_gets_the_sdk_paths_answer(hostile: Hostile, mode: str) -> None:
    """Each way an HTTP exchange fails: the host's answer is the one the SDK path gives (same words)."""
    if mode == "down":  # gone after the handshake and the listing: a connection refused
        stop(hostile.servers[mode])
    rid, name = f"poke-{mode}", f"hostile_{mode}"
    began = {}
    for fast, proxy in hostile.hosts.items():  # both at once: the slow modes' waits overlap
        began[fast] = time.monotonic()
        proxy.send(call(rid, f"{name}__poke"))
    answers = {}
    for fast, proxy in hostile.hosts.items():
        answers[fast] = proxy.wait_for(rid)
        assert time.monotonic() - began[fast] < HOSTILE_TIMEOUT + 5
    for proxy in hostile.hosts.values():
        proxy.send({"jsonrpc": "2.0", "id": f"after-{mode}", "method": "tools/list"})
        assert proxy.wait_for(f"after-{mode}")  # still up (a server that is down makes it an error)
        proxy.assert_stdout_is_jsonrpc()
    assert answers[True] == answers[False], answers
    assert answers[True]["result"]["isError"] is True and f"'{name}'" in json.dumps(answers[True])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_hosts_cancellation_reaches_the_servers_handler(
    tmp_path: Path, home: Home, vaults: Vaults, mode: str
) -> None:
    """2025: ``notifications/cancelled`` for our id is POSTed; 2026: the POST is aborted (no notice)."""
    vault = vaults.vault()
    started, cancelled = tmp_path / "started", tmp_path / "cancelled"
    args = {"seconds": 600, "started": str(started), "cancelled": str(cancelled)}
    with raw_host(policy(tmp_path, vault.url), home, mode) as proxy:
        proxy.send(call("w", "wait", args))
        wait_until(started.exists, "the server to receive the call")
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w"}})
        wait_until(cancelled.exists, "the cancellation to reach the server's handler")
        proxy.send(call("after", "read_note", {"name": "hello.md"}))
        assert "result" in proxy.wait_for("after")
        assert not [line for line in proxy.lines if json.loads(line).get("id") == "w"]
    # Each exchange is recorded once it ends (the proxy is gone now, so every one has, or soon will).
    [post] = recorded(vault.record, "wait")
    if mode == "legacy":
        wait_until(lambda: exchanges(vault.record, "notifications/cancelled"), "the notice to be recorded")
    notices = exchanges(vault.record, "notifications/cancelled")
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


def test_resource_reads_and_prompts_go_raw_too(tmp_path: Path, home: Home, vaults: Vaults) -> None:
    vault = vaults.vault()
    with raw_host(policy(tmp_path, vault.url), home) as proxy:
        proxy.send({"jsonrpc": "2.0", "id": "r", "method": "resources/read", "params": {"uri": "note://hello"}})
        prompt = {"name": "summarize", "arguments": {"name": "hello.md"}}
        proxy.send({"jsonrpc": "2.0", "id": "p", "method": "prompts/get", "params": prompt})
        lines = {rid: answer_line(proxy, rid) for rid in ("r", "p")}
    for method, rid in (("resources/read", "r"), ("prompts/get", "p")):
        [post] = wait_until(lambda m=method: exchanges(vault.record, m), f"a recorded {method}")
        ours = post["message"]["id"]
        assert FAST.match(str(ours)), (method, ours)
        assert lines[rid].rstrip(b"\n") == answer_bytes(post).replace(
            json.dumps(ours).encode(), json.dumps(rid).encode()
        )
    assert b"# Hello" in lines["r"] and b"Summarize the note hello.md." in lines["p"]
