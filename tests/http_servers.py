"""Start an HTTP test server on a free port and wait until it accepts connections (a poll with
a deadline, not a sleep); stop it at the end. For tests/test_proxy_http*.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import stdio_client

from tests.helpers import wait_until
from tests.proxy_support import proxy_params

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start(module: str, *args: str, port: int, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m module port *args``, returned once ``port`` accepts connections."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, str(port), *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"{module} exited with {proc.returncode} before listening on {port}")
        return accepts(port)

    wait_until(up, 30, f"{module} to listen on port {port}")
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


@contextmanager
def running(module: str, *args: str, port: int, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = start(module, *args, port=port, env=env)
    try:
        yield proc
    finally:
        stop(proc)


@asynccontextmanager
async def proxied(
    policy: Path, home: Path, env: dict[str, str] | None = None, downstream: str = "auto", **client_kw: Any
) -> AsyncIterator[Client]:
    """The real proxy (stdio subprocess) with ``env`` added to its environment, driven by the SDK client;
    ``downstream`` is the era it speaks to its servers (``auto``: the 2026 probe first; ``legacy``)."""
    params = proxy_params(policy, home, "--downstream-mode", downstream)
    params.env = {**(params.env or {}), **(env or {})}
    errlog = open(home / "proxy-stderr.log", "a")  # noqa: SIM115 - closed below, after the client
    try:
        async with Client(stdio_client(params, errlog=errlog), cache=None, **client_kw) as c:
            yield c
    finally:
        errlog.close()


def loopback_alias() -> str:
    """A name that is not spelled as loopback but resolves to it here ('localhost.' or this host's name)."""
    for name in ("localhost.", socket.gethostname()):
        try:
            found = {str(info[4][0]) for info in socket.getaddrinfo(name, 443, type=socket.SOCK_STREAM)}
        except OSError:
            continue
        if found and all(a.startswith("127.") or a == "::1" for a in found):
            return name
    raise AssertionError("no name on this machine resolves only to loopback without being spelled as loopback")
