"""The review page under abuse, over real HTTP to a real server: parallel password guessing,
oversized bodies, and refusals meant to flood or poison the append-only log."""

from __future__ import annotations

import json
import re
import select
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatekeeper.canonical import format_ts, utc_now
from gatekeeper.home import Home
from gatekeeper.store.chain import verify_rows
from gatekeeper.store.store import Store
from tests.helpers import budget
from tests.review_support import PASSWORD, Page, event_count, hashed, review_process

MiB = 1024 * 1024


@pytest.fixture
def reviewers(home: Home) -> None:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())


@pytest.fixture
def server(home: Home, reviewers: None) -> Iterator[tuple[str, int]]:
    with review_process(home) as (base, proc):
        yield base, proc.pid


def rows(home: Home, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(home.db_path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def login_form(base: str) -> tuple[httpx.Client, str]:
    page = Page(base)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.client.get("/login").text)
    assert token is not None
    return page.client, token.group(1)


# -- item 3: the throttle counts before it checks ------------------------------------------------


def test_parallel_wrong_passwords_get_at_most_five_checks(home: Home, server: tuple[str, int]) -> None:
    base, _pid = server
    forms = [login_form(base) for _ in range(30)]
    start = threading.Barrier(30)

    def guess(form: tuple[httpx.Client, str]) -> int:
        client, token = form
        start.wait()
        data = {"username": "alice", "password": "not the password", "csrf_token": token}
        return client.post("/login", data=data, timeout=60).status_code

    with ThreadPoolExecutor(30) as pool:
        codes = list(pool.map(guess, forms))

    checked = rows(home, "SELECT count(*) FROM audit_event WHERE kind = 'login_failed' AND payload LIKE '%wrong%'")
    assert checked[0][0] <= 5, f"{checked[0][0]} passwords were checked"
    assert codes.count(401) == checked[0][0] and codes.count(429) == 30 - checked[0][0], codes
    assert rows(home, "SELECT count(*) FROM login_attempt WHERE outcome IS NOT NULL")[0][0] == checked[0][0]

    # The right password now is throttled too: the name has had its five tries.
    right = Page(base).login("alice", PASSWORD)
    assert right.status_code == 429 and "Too many log-in attempts" in right.text
    assert "gk_session" not in right.cookies
    # Once the window has passed (the attempts made 16 minutes old), the right password works.
    conn = sqlite3.connect(home.db_path)
    conn.execute("UPDATE login_attempt SET started_at = ?", (format_ts(utc_now() - timedelta(minutes=16)),))
    conn.commit()
    conn.close()
    assert Page(base).login("alice", PASSWORD).status_code == 303


# -- item 4: request bodies are capped before parsing ----------------------------------------------


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (the peak so far): a body read and freed shows only in the peak."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    assert set(found) == {"VmRSS", "VmHWM"}, found
    return found


def raw_post(base: str, headers: dict[str, str], body: Iterator[bytes]) -> tuple[int, bytes, float]:
    """POST /login over a plain socket, streaming ``body`` until the server answers or closes.

    Returns (status, response bytes, seconds until the answer). Sending stops as soon as an
    answer is readable, as a real client's would when the server hangs up.
    """
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": f"{host}:{port}", "Origin": base, **headers}.items())
    began = time.monotonic()
    try:
        sock.sendall(f"POST /login HTTP/1.1\r\n{head}\r\n".encode())
        for chunk in body:
            if select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        answer, took = b"", None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # a refusal closes the connection: read to its end
            if not select.select([sock], [], [], deadline - time.monotonic())[0]:
                break
            try:
                part = sock.recv(65536)
            except ConnectionResetError:
                break
            if not part:
                break
            answer += part
            if took is None:
                took = time.monotonic() - began
    finally:
        sock.close()
    match = re.match(rb"HTTP/1.1 (\d{3})", answer)
    assert match is not None and took is not None, f"no HTTP answer: {answer[:200]!r}"
    return int(match.group(1)), answer, took


def fixed(size: int, chunk: int = 256 * 1024) -> Iterator[bytes]:
    sent = 0
    while sent < size:
        n = min(chunk, size - sent)
        sent += n
        yield b"a" * n


def multipart_file(size: int) -> Iterator[bytes]:
    """Exactly ``size`` bytes: one well-formed multipart file part (the reported attack's shape)."""
    head = (
        b'--XyZ\r\nContent-Disposition: form-data; name="password"; filename="p.bin"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n"
    )
    tail = b"\r\n--XyZ--\r\n"
    yield head
    yield from fixed(size - len(head) - len(tail))
    yield tail


def chunked(size: int, chunk: int = 8 * 1024) -> Iterator[bytes]:
    for piece in fixed(size, chunk):
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def test_huge_bodies_are_refused_unread(home: Home, server: tuple[str, int]) -> None:
    base, pid = server
    Page(base).login("alice", "warm up the page, not the limit")  # the first request allocates a little
    before = memory_kib(pid)
    multipart = {"Content-Type": "multipart/form-data; boundary=XyZ", "Content-Length": str(48 * MiB)}
    form = {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": str(48 * MiB)}
    streamed = {"Content-Type": "application/x-www-form-urlencoded", "Transfer-Encoding": "chunked"}

    answers = {
        "multipart": raw_post(base, multipart, multipart_file(48 * MiB)),
        "form": raw_post(base, form, fixed(48 * MiB)),
        "chunked": raw_post(base, streamed, chunked(48 * MiB)),  # no Content-Length at all
        "json": raw_post(base, {"Content-Type": "application/json", "Content-Length": "2"}, iter([b"{}"])),
    }
    after = memory_kib(pid)
    grew = {k: after[k] - before[k] for k in after}
    assert max(grew.values()) < 8 * 1024, f"the server's memory grew by {grew} KiB"  # was ~370 MiB at peak

    status, answer, took = answers["multipart"]
    assert status == 415 and b"file uploads are not accepted" in answer and took < budget(5)
    status, answer, took = answers["form"]
    assert status == 413 and b"at most 65536 bytes" in answer and took < budget(5)
    status, answer, took = answers["chunked"]
    assert status == 413 and b"request body too large" in answer and took < budget(5)
    assert answers["json"][0] == 415
    assert event_count(home, "request_refused") >= 1
    # A form within the cap still works, on a fresh connection.
    assert Page(base).login("alice", PASSWORD).status_code == 303


# -- item 8: refusal events are bounded, secret-free and coalesced ----------------------------------


def audit_bytes(home: Home) -> int:
    row = rows(
        home,
        "SELECT coalesce(sum(length(CAST(payload AS BLOB)) + length(actor) + length(kind) + 160), 0) FROM audit_event",
    )
    return int(row[0][0])


def test_a_flood_of_huge_host_headers_is_counted_not_stored(home: Home, reviewers: None) -> None:
    host = "h" * 12_000
    with review_process(home) as (base, _proc):
        before = audit_bytes(home)
        last = rows(home, "SELECT max(seq) FROM audit_event")[0][0]
        with httpx.Client(base_url=base) as client:
            codes = {client.get("/login", headers={"Host": host}).status_code for _ in range(100)}
        assert codes == {400}
    # The server stopped cleanly (SIGTERM): every counter is flushed.
    grew = audit_bytes(home) - before
    assert grew < 20 * 1024, f"the audit log grew by {grew} bytes"
    new = rows(home, "SELECT seq, kind, payload FROM audit_event WHERE seq > ? ORDER BY seq", (last,))
    whole = [(seq, json.loads(p)) for seq, kind, p in new if kind == "request_refused"]
    assert len(whole) == 1 and len(whole[0][1]["host"]) < 300 and "cut: 12000 chars" in whole[0][1]["host"]
    repeats = [json.loads(p) for _seq, kind, p in new if kind == "refusal_repeated"]
    assert sum(r["repeats"] for r in repeats if r["first_seq"] == whole[0][0]) == 99  # 1 + 99 = 100
    columns = "seq, at, kind, actor, proposal_id, payload, prev_hash, hash"
    assert verify_rows(rows(home, f"SELECT {columns} FROM audit_event ORDER BY seq")).ok  # type: ignore[arg-type]


def test_a_password_typed_as_the_name_is_stored_nowhere(home: Home, reviewers: None) -> None:
    secret_name, secret_password = "Tr0ub4dor&3-typed-as-name", "Corr3ct-H0rse-typed-as-password"
    with review_process(home) as (base, _proc):
        response = Page(base).login(secret_name, secret_password)
        assert response.status_code == 401 and "Wrong name or password" in response.text
        assert Page(base).login("alice", secret_password).status_code == 401
        files = [p for p in home.path.iterdir() if p.name.startswith("gatekeeper.db")]
        while_running = b"".join(p.read_bytes() for p in files)
    after = b"".join(p.read_bytes() for p in home.path.iterdir() if p.name.startswith("gatekeeper.db"))
    for blob in (while_running, after, (home.path / "review.log").read_bytes()):
        assert secret_name.encode() not in blob and secret_password.encode() not in blob
    payloads = [json.loads(p) for (p,) in rows(home, "SELECT payload FROM audit_event WHERE kind = 'login_failed'")]
    assert payloads[0]["username"].startswith("unknown name (keyed sha256 prefix ")
    assert payloads[1]["username"] == "alice"  # a real reviewer's name is kept as typed
