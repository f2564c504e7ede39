"""Real Streamable HTTP peers started by tests: the TypeScript-SDK vault server and server-everything.

Each runs in its own process group on a loopback port, with its stdout and stderr in files (a full pipe
never stalls it, and the output outlives it for failure messages). Readiness is read from the server's
own "listening" line and then a TCP connect, polled with a deadline. The fixtures ``vault_http`` and
``everything_http`` are usable from any test file (``from tests.http_support import vault_http``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.peers.external import PEERS, everything_server, ts_server_modules

VAULT_SERVER = PEERS / "vault_http_server.mjs"
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0


@dataclass
class HttpPeer:
    """A running HTTP MCP server: its URL, its process, and what it printed so far."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    root: Path | None = None  # the vault folder, for the vault server
    extra: dict[str, Any] = field(default_factory=dict)

    def output(self) -> str:
        """Both streams, for failure messages."""
        out = self.stdout.read_text(errors="replace") if self.stdout.exists() else ""
        err = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        return f"[{self.name} stdout]\n{out}\n[{self.name} stderr]\n{err}"

    def tool_calls(self, name: str | None = None) -> list[dict[str, Any]]:
        """The tool calls the vault server ran (one JSON line each on its stderr), optionally one tool's only."""
        calls = []
        for line in self.stderr.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if "tool" in record and (name is None or record["tool"] == name):
                    calls.append(record)
        return calls


def free_port() -> int:
    """A loopback port nobody listens on now (for servers that cannot be told to pick one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the server's whole process group (npm bin shims may start children), politely first."""
    if process.poll() is None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=STOP_TIMEOUT)
                break
            except subprocess.TimeoutExpired:
                continue
    process.wait()


@contextmanager
def _started(
    name: str, command: list[str], env: dict[str, str], logs: Path, ready: re.Pattern[str], stream: str
) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path, re.Match[str]]]:
    """Start ``command``; wait until ``ready`` matches a line of its ``stream`` ("stdout"/"stderr")."""
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / f"{name}.stdout", logs / f"{name}.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True
        )
    try:
        watched = out_path if stream == "stdout" else err_path
        deadline = time.monotonic() + READY_TIMEOUT
        while not (found := ready.search(watched.read_text(errors="replace"))):
            if process.poll() is not None or time.monotonic() > deadline:
                state = f"exited with {process.returncode}" if process.poll() is not None else "still silent"
                text = out_path.read_text(errors="replace") + err_path.read_text(errors="replace")
                raise AssertionError(f"{name} did not start ({state} after {READY_TIMEOUT:.0f} s at most):\n{text}")
            time.sleep(0.02)
        yield process, out_path, err_path, found
    finally:
        _stop(process)


def _wait_accepting(peer: HttpPeer, port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not _accepts(port):
        assert peer.process.poll() is None, f"{peer.name} exited before accepting:\n{peer.output()}"
        assert time.monotonic() < deadline, f"{peer.name} printed its port but does not accept:\n{peer.output()}"
        time.sleep(0.02)


@contextmanager
def vault_server(
    vault: Path, logs: Path, *, token: str | None = None, json_responses: bool = False
) -> Iterator[HttpPeer]:
    """tests/peers/vault_http_server.mjs over ``vault`` on a port it picks; SSE answers unless ``json_responses``."""
    vault.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NODE_PATH": str(ts_server_modules())}
    env.pop("VAULT_TOKEN", None)
    if token is not None:
        env["VAULT_TOKEN"] = token
    env["VAULT_JSON"] = "1" if json_responses else "0"
    ready = re.compile(r"^listening (http://127\.0\.0\.1:(\d+)/mcp)$", re.M)
    command = ["node", str(VAULT_SERVER), str(vault), "0"]
    with _started("vault-http", command, env, logs, ready, "stdout") as (process, out, err, found):
        peer = HttpPeer("vault-http", found[1], process, out, err, root=vault.resolve())
        _wait_accepting(peer, int(found[2]))
        yield peer


@contextmanager
def everything(logs: Path, attempts: int = 3) -> Iterator[HttpPeer]:
    """server-everything in ``streamableHttp`` mode; it takes its port from PORT, so pick a free one
    (and try again with another if someone took it in between: the server exits on EADDRINUSE)."""
    binary = everything_server()
    ready = re.compile(r"listening on port (\d+)")
    with ExitStack() as stack:
        for attempt in range(1, attempts + 1):
            port = free_port()
            env = {**os.environ, "PORT": str(port)}
            command = [str(binary), "streamableHttp"]
            try:
                process, out, err, _ = stack.enter_context(_started("everything", command, env, logs, ready, "stderr"))
                break
            except AssertionError as exc:
                if attempt == attempts or "already in use" not in str(exc):
                    raise
        peer = HttpPeer("everything", f"http://127.0.0.1:{port}/mcp", process, out, err)
        _wait_accepting(peer, port)
        yield peer


@pytest.fixture
def vault_http(tmp_path: Path) -> Iterator[HttpPeer]:
    """The vault server over ``tmp_path/vault`` (SSE answers, no token); its output is printed at teardown,
    which pytest shows only when the test failed."""
    with vault_server(tmp_path / "vault", tmp_path / "http-peers") as peer:
        try:
            yield peer
        finally:
            print(peer.output())


@pytest.fixture
def everything_http(tmp_path: Path) -> Iterator[HttpPeer]:
    """server-everything on a free loopback port; its output is printed at teardown (shown on failure)."""
    with everything(tmp_path / "http-peers") as peer:
        try:
            yield peer
        finally:
            print(peer.output())
