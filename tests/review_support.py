"""The review page two ways, and an httpx client that behaves like its browser tab.

- ``review_app``: the app in this process, spoken to through its ASGI interface (Starlette's
  TestClient, an ``httpx.Client``): the same middlewares, routes and database, no server start.
- ``review_server`` / ``review_process``: uvicorn in a subprocess over real HTTP, for what only a
  real server shows (the Host header as sent, body streaming, memory, parallel requests, logs).
"""

from __future__ import annotations

import functools
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
from starlette.testclient import TestClient

from gatekeeper.home import Home
from gatekeeper.review.app import Config, create_app
from gatekeeper.review.auth import hash_password
from tests.helpers import LAST_RESORT, close_at_teardown
from tests.process_support import stop
from tests.requirements import CHROMIUM

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "PASSWORD"]

PASSWORD = "correct horse battery staple"
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def review_server(home: Home) -> Iterator[str]:
    with review_process(home) as (base, _proc):
        yield base


@contextmanager
def review_process(home: Home, *args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The server and its process (for its pid), ``args`` added to its command line; leaving the block
    stops it with SIGTERM."""
    port = free_port()
    env = {**os.environ, "GATEKEEPER_HOME": str(home.path), "PYTHONPATH": str(REPO)}
    log = open(home.path / "review.log", "ab")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "gatekeeper", "review", "--port", str(port), *args], env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + LAST_RESORT
        while True:
            try:
                httpx.get(f"{base}/login", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((home.path / "review.log").read_text()) from None
                time.sleep(0.1)
        yield base, proc
    finally:
        stop(proc)
        log.close()


IN_PROCESS_PORT = 8750  # nothing listens on it: it only sets the Host and Origin the app expects


@dataclass(frozen=True)
class InProcess:
    """A review app running in this process; ``Page(site)`` talks to it without a socket."""

    app: Any
    base: str


Site = str | InProcess  # a real server's base URL, or an in-process app


@contextmanager
def review_app(home: Home) -> Iterator[InProcess]:
    """The app as ``gatekeeper review`` builds it; the block runs its lifespan (start and stop)."""
    app = create_app(Config(home, IN_PROCESS_PORT))
    base = f"http://127.0.0.1:{IN_PROCESS_PORT}"
    with TestClient(app, base_url=base):
        yield InProcess(app, base)


@functools.cache
def hashed() -> str:
    """PASSWORD's argon2 hash, made once per test run (each costs a few hundred ms by design)."""
    return hash_password(PASSWORD)


class Page:
    """An httpx client with the headers a same-origin browser tab sends."""

    def __init__(self, site: Site) -> None:
        self.base = site.base if isinstance(site, InProcess) else site
        headers = {"Origin": self.base, "Sec-Fetch-Site": "same-origin"}
        self.client: httpx.Client
        if isinstance(site, InProcess):
            in_process = TestClient(site.app, base_url=self.base, headers=headers, follow_redirects=False)
            self.client = cast(httpx.Client, in_process)  # an httpx2 client: the same API
        else:
            self.client = httpx.Client(base_url=self.base, headers=headers, follow_redirects=False)
        close_at_teardown(self.client.close)

    def login(self, username: str = "alice", password: str = PASSWORD) -> httpx.Response:
        form = self.client.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token is not None
        return self.client.post(
            "/login", data={"username": username, "password": password, "csrf_token": token.group(1)}
        )

    def csrf(self, proposal_id: str) -> str:
        html = self.client.get(f"/proposals/{proposal_id}").text
        match = re.search(r'name="csrf_token" value="([^"]+)"', html)
        assert match is not None, html[:500]
        return match.group(1)

    def approve(
        self, proposal_id: str, sha256: str, path: str, csrf: str | None = None, password: str = PASSWORD, **kw: Any
    ) -> httpx.Response:
        """The approve form as the page posts it, with the password typed again (step-up; "" leaves it out)."""
        data = {"sha256": sha256, "path": path, "password": password}
        if csrf is not None:
            data["csrf_token"] = csrf
        return self.client.post(f"/proposals/{proposal_id}/approve", data=data, **kw)


def decisions(home: Home) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(home.db_path)
    try:
        return conn.execute("SELECT proposal_id, verdict, reviewer FROM decision ORDER BY id").fetchall()
    finally:
        conn.close()


def event_count(home: Home, kind: str) -> int:
    conn = sqlite3.connect(home.db_path)
    try:
        return int(conn.execute("SELECT count(*) FROM audit_event WHERE kind = ?", (kind,)).fetchone()[0])
    finally:
        conn.close()


# Debian's Chromium, headless; without the background-networking flags it keeps dialling the closed network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def start_up(home: Path, port: int, policy: Path, password: str) -> subprocess.Popen[str]:
    """`gatekeeper up` as a real process, creating reviewer alice from the password on stdin."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gatekeeper",
            "--home",
            str(home),
            "up",
            "--port",
            str(port),
            "--policy",
            str(policy),
            "--reviewer",
            "alice",
            "--password-stdin",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdin is not None
    proc.stdin.write(password + "\n")
    proc.stdin.close()
    return proc
