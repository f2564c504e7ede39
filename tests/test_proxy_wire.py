"""Raw bytes on the proxy's stdin: malformed JSON-RPC, storms, and real hosts' quirks.

Whatever arrives, the proxy stays up and every line it writes to stdout is JSON-RPC."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from tests.proxy_support import proxy_params, rows, write_policy

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class RawProxy:
    """The proxy as a plain subprocess: bytes in, lines out, nothing interpreted for it."""

    def __init__(self, policy: Path, home: Path) -> None:
        params = proxy_params(policy, home)
        self.stderr = open(home / "raw-stderr.log", "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**params.env, "PATH": "/usr/bin:/bin"},
            cwd=params.cwd,  # type: ignore[dict-item]
        )
        self.lines: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def send(self, data: bytes | dict[str, Any]) -> None:
        raw = json.dumps(data).encode() if isinstance(data, dict) else data
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def wait_for(self, request_id: Any, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                message = json.loads(line)
                if message.get("id") == request_id and ("result" in message or "error" in message):
                    return message
            time.sleep(0.02)
        raise AssertionError(f"no answer to id {request_id!r}; stdout so far: {self.lines[-3:]}")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.stderr.close()

    def assert_stdout_is_jsonrpc(self) -> None:
        for line in self.lines:
            message = json.loads(line)  # must parse
            assert message.get("jsonrpc") == "2.0", line[:200]
            assert ("method" in message) or ("id" in message and ("result" in message or "error" in message))


def malformed_inputs() -> list[bytes]:
    cases: list[bytes] = []
    valid = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).encode()
    cases += [valid[:i] for i in range(1, len(valid))]  # truncated JSON
    call = json.dumps({"jsonrpc": "2.0", "id": 70, "method": "tools/call", "params": {"name": "read_note"}}).encode()
    cases += [call[:i] for i in range(1, len(call), 2)]
    cases += [b"not json", b"{", b"}", b"[]", b"[1,2]", b"null", b"42", b'"str"', b"true", b"{}", b"  "]
    cases += [b"\r", b"\t{}", b"{}{}", b'{"jsonrpc":"2.0"}{', b"\xef\xbb\xbf{}", b"{" * 100]
    cases += [b"\xff\xfe\xfd", b"\xc3\x28", b'{"jsonrpc":"2.0","id":8,"method":"\xed\xa0\x80"}', b"\x00" * 10]
    for bad in ([], 1, None, True, "x", 1.5, -1, 10**30, "9" * 500, {"a": 1}, [1]):
        cases.append(json.dumps({"jsonrpc": "2.0", "id": bad, "method": "tools/list"}).encode())
    for version in (None, "1.0", 2, "2.0 "):
        cases.append(json.dumps({"jsonrpc": version, "id": 9, "method": "tools/list"}).encode())
    for method in ("nope", "", "tools/", "tools/list/extra", "rpc.discover", "a" * 1000, "initialize"):
        cases.append(json.dumps({"jsonrpc": "2.0", "id": 10, "method": method}).encode())
    for params in (
        "x",
        1,
        [],
        None,
        {"name": 42},
        {"name": None},
        {"name": "read_note", "arguments": "x"},
        {"name": "read_note", "arguments": [1]},
        {"name": "create_note", "arguments": None},
        {"name": "x" * 10000},
        {"name": "read_note", "arguments": {"path": {"$ref": "#"}}},
    ):
        cases.append(json.dumps({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": params}).encode())
    cases += [
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": p}).encode()
        for p in ({"requestId": 999}, {"requestId": None}, {}, "x")
    ]
    cases += [
        json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}}
        ).encode()
        for _ in range(50)
    ]  # storm
    cases += [
        json.dumps({"jsonrpc": "2.0", "id": 12, "result": {}}).encode(),  # responses nobody asked for
        json.dumps({"jsonrpc": "2.0", "id": 13, "error": {"code": 1, "message": "x"}}).encode(),
    ]
    cases.append(
        b'{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{"_meta":' + b"[" * 5000 + b"]" * 5000 + b"}}"
    )
    cases.append(
        b'{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"read_note","arguments":{"path":"'
        + b"a" * (10 * 1024 * 1024)
        + b'"}}}'
    )  # a 10 MB line
    return cases


@pytest.mark.slow
def test_malformed_input_never_breaks_the_proxy_or_its_stdout(tmp_path: Path, home: Home) -> None:
    policy = write_policy(tmp_path)
    proxy = RawProxy(policy, home.path)
    try:
        proxy.send(INIT)
        assert "result" in proxy.wait_for(1)
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        cases = malformed_inputs()
        assert len(cases) >= 200
        for case in cases:
            proxy.send(case)
        proxy.send({"jsonrpc": "2.0", "id": "after", "method": "tools/list"})
        answer = proxy.wait_for("after", timeout=60)
        assert "read_note" in {t["name"] for t in answer["result"]["tools"]}
        proxy.send(
            {"jsonrpc": "2.0", "id": "read", "method": "tools/call", "params": {"name": "list_notes", "arguments": {}}}
        )
        assert proxy.wait_for("read")["result"]["isError"] is False
        assert proxy.proc.poll() is None
        bad_call = proxy.wait_for(11)
        assert bad_call.get("error") or bad_call["result"].get("isError")
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def test_first_message_is_tools_list_with_the_2026_envelope(tmp_path: Path, home: Home) -> None:
    proxy = RawProxy(write_policy(tmp_path), home.path)
    try:
        proxy.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}})
        answer = proxy.wait_for(1)
        assert "create_note" in {t["name"] for t in answer["result"]["tools"]}
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def test_server_discover_with_a_string_id(tmp_path: Path, home: Home) -> None:
    proxy = RawProxy(write_policy(tmp_path), home.path)
    try:
        proxy.send({"jsonrpc": "2.0", "id": "disc-1", "method": "server/discover", "params": {"_meta": ENVELOPE}})
        answer = proxy.wait_for("disc-1")
        assert answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "gatekeeper"
        assert "2026-07-28" in answer["result"]["supportedVersions"]
        proxy.send({"jsonrpc": "2.0", "id": "list-1", "method": "tools/list", "params": {"_meta": ENVELOPE}})
        assert "tools" in proxy.wait_for("list-1")["result"]
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def test_started_asked_killed_and_started_again(tmp_path: Path, home: Home) -> None:
    policy = write_policy(tmp_path)
    for attempt in range(2):
        proxy = RawProxy(policy, home.path)
        try:
            proxy.send({"jsonrpc": "2.0", "id": attempt, "method": "server/discover", "params": {"_meta": ENVELOPE}})
            assert "result" in proxy.wait_for(attempt)
            if attempt == 1:
                proxy.send(
                    {
                        "jsonrpc": "2.0",
                        "id": "t",
                        "method": "tools/call",
                        "params": {"name": "list_notes", "arguments": {}, "_meta": ENVELOPE},
                    }
                )
                assert proxy.wait_for("t")["result"]["isError"] is False
            proxy.assert_stdout_is_jsonrpc()
        finally:
            proxy.close()  # SIGKILL, as hosts do


def test_stdout_stays_clean_when_the_child_spams_stderr_and_stdout(tmp_path: Path, home: Home) -> None:
    """A child that prints junk: our stdout still carries only JSON-RPC."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    noisy = tmp_path / "noisy.py"
    noisy.write_text(
        "import sys\nprint('junk on stdout before the protocol', flush=True)\n"
        "print('lots of stderr\\n' * 100, file=sys.stderr, flush=True)\n"
        "from gatekeeper.demo.notes_server import build\nbuild(__import__('pathlib').Path(sys.argv[1])).run('stdio')\n"
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"version: 1\nservers:\n  noisy:\n    command: {__import__('sys').executable}\n"
        f"    args: [{str(noisy)!r}, {str(workspace)!r}]\n    workspace: {workspace}\n"
        f"    env: {{PYTHONPATH: {str(Path(__file__).resolve().parent.parent)!r}}}\n"
        "    tools: {list_notes: allow}\n"
    )
    proxy = RawProxy(policy, home.path)
    try:
        proxy.send(INIT)
        proxy.wait_for(1)
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        proxy.send(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_notes", "arguments": {}}}
        )
        assert proxy.wait_for(2)["result"]["isError"] is False
        proxy.assert_stdout_is_jsonrpc()
        assert b"lots of stderr" in (home.path / "logs" / "noisy.log").read_bytes()
    finally:
        proxy.close()


def test_forged_request_state_is_refused(tmp_path: Path, home: Home) -> None:
    """A retry carrying a request_state Gatekeeper did not sign proposes nothing and says so."""
    proxy = RawProxy(write_policy(tmp_path), home.path)
    try:
        for i, state in enumerate(("forged", "eyJwIjoiMDFYIn0.abc.def", 42)):
            proxy.send(
                {
                    "jsonrpc": "2.0",
                    "id": f"f{i}",
                    "method": "tools/call",
                    "params": {
                        "name": "create_note",
                        "arguments": {"title": "x", "body": "y"},
                        "requestState": state,
                        "_meta": ENVELOPE,
                    },
                }
            )
            answer = proxy.wait_for(f"f{i}")
            if isinstance(state, str):  # well-formed but not signed by us: a tool error that says so
                assert answer["result"]["isError"] is True, answer
                assert "request state is not one Gatekeeper issued" in answer["result"]["content"][0]["text"]
            else:  # not even a string: the params are invalid
                assert answer["error"]["code"] == -32602, answer
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()
    assert rows(home.db_path, "SELECT count(*) FROM proposal") == [(0,)]
