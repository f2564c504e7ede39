"""Shared test helpers: a real home with a real migrated database, proposal drafts, and waiting
with a deadline (never a bare sleep) for something another process does."""

from __future__ import annotations

import base64
import hashlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import IO, TypeVar

import anyio
from argon2 import PasswordHasher

from gatekeeper.canonical import format_ts, utc_now
from gatekeeper.home import Home, ensure_keys
from gatekeeper.store import migrate
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.store import ProposalDraft, Store
from gatekeeper.trust.signing import DecisionFacts

T = TypeVar("T")


LAST_RESORT = 60.0
"""The least any wait for something that will happen gives it, whatever the call says: the wait ends as
soon as the thing happens, so a passing test pays nothing for it, while on a loaded machine (a load of
10 on 2 cores) what takes 0.1 s idle can take seconds. A test's deadline follows the work; this only
ends a wait for something that never comes."""


def patience(timeout: float) -> float:
    """The seconds a wait asked for ``timeout`` may last: never less than ``LAST_RESORT``."""
    return max(timeout, LAST_RESORT)


def budget(seconds: float) -> float:
    """A time the product promises on an idle machine (a host's 2 s before SIGTERM), as a test holds it
    to on this one: stretched by how many runnable processes share each core (the 1-minute load average
    over the CPU count), never shortened. A wait that is a bug (a fixed sleep, a missed wake-up) still
    fails where the machine is idle, as in CI."""
    return seconds * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


class WaitTimeout(AssertionError):
    """What a test waited for did not happen in time; the message names it."""


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.02) -> T:
    """Poll ``predicate`` until it returns something truthy (returned); fail after ``patience(timeout)`` s,
    saying ``what`` was awaited. The short pause between polls is the poll, not synchronisation."""
    timeout = patience(timeout)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


async def await_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.02) -> T:
    """:func:`wait_until` for async tests: polls without blocking the event loop."""
    timeout = patience(timeout)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}")
        await anyio.sleep(interval)


def line_queue(stream: IO[str]) -> queue.Queue[str]:
    """Lines of a child's output as they come, read by a thread, so a test can wait with a deadline.

    The thread owns the pipe and closes it at end of file (the child's exit), so it is never left to
    the garbage collector (a ResourceWarning) nor closed under a read still running."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        with stream:
            for line in stream:
                lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def next_line(lines: queue.Queue[str], timeout: float, what: str) -> str:
    timeout = patience(timeout)
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}") from None


_AT_TEARDOWN: list[Callable[[], object]] = []


def close_at_teardown(close: Callable[[], object]) -> None:
    """Call ``close`` when the current test ends (conftest): for clients a test makes and drops inline."""
    _AT_TEARDOWN.append(close)


def run_teardowns() -> None:
    """Close what ``close_at_teardown`` collected, newest first."""
    while _AT_TEARDOWN:
        _AT_TEARDOWN.pop()()


def make_home(path: Path) -> Home:
    """A home with its key and a migrated database: ``gatekeeper.db``, or the server that
    ``$GATEKEEPER_DATABASE_URL`` names (the ``home`` fixture sets it for the PostgreSQL runs)."""
    home = Home(path)
    home.create()
    home.ensure_key()
    migrate.upgrade(home.database)
    ensure_keys(home)
    return home


def call_arguments(path: str, content: bytes) -> tuple[dict[str, str], str]:
    """The arguments a real call under a ``{arg: path}``/``{arg: content}`` rule sends, and that rule's
    encoding: UTF-8 text as itself, other bytes as base64 (latin-1 would mangle every non-ASCII byte)."""
    try:
        return {"path": path, "content": content.decode("utf-8")}, "text"
    except UnicodeDecodeError:
        return {"path": path, "content": base64.b64encode(content).decode("ascii")}, "base64"


def draft(
    path: str = "notes/a.md",
    content: bytes = b"hello\n",
    *,
    server: str = "notes",
    tool: str = "create_note",
    arguments: object = None,
    expires_in: float = 3600,
    session_id: str | None = "s1",
) -> ProposalDraft:
    """A draft as the proxy builds it; ``arguments`` defaults to what a real call for these bytes sends."""
    sent, encoding = call_arguments(path, content)
    return ProposalDraft(
        server=server,
        tool=tool,
        arguments=arguments if arguments is not None else sent,
        workspace="/tmp/workspace",
        path=path,
        content=content,
        encoding=encoding,
        policy_digest="0" * 64,
        expires_at=format_ts(utc_now() + timedelta(seconds=expires_in)),
        client_name="pytest",
        client_version="1",
        protocol_version="2025-11-25",
        session_id=session_id,
    )


# Every approval carries proof (issue 14): tests that decide through the store approve with the
# password typed again. A real argon2id hash, made cheap to check (the parameters are in the hash).
TEST_PASSWORD = "alice's test passphrase"
TEST_HASH = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash(TEST_PASSWORD)
PROOF = PasswordProof(TEST_PASSWORD)


def add_reviewer(store: Store, name: str = "alice") -> None:
    store.add_reviewer(name, TEST_HASH)


def record_commit(store: Store, proposal_id: str, outcome: str, **fields: str | None) -> None:
    """Stand-in for the committer's file step: its intent, then its outcome, through the same store calls."""
    assert store.record_commit_intents([proposal_id]) == {proposal_id: "new"}
    assert store.record_commit_outcomes([{"proposal_id": proposal_id, "outcome": outcome, **fields}]) == {
        proposal_id: True
    }


def signed_decision(home: Home, proposal_id: str) -> tuple[DecisionFacts, str, str]:
    """A decision as its Ed25519 signature covers it, rebuilt from the rows: (facts, key id, signature)."""
    conn = sqlite3.connect(home.db_path)
    try:
        row = conn.execute(
            "SELECT p.id, p.server, p.tool, p.workspace, p.workspace_real, d.path, d.mode, d.base_sha256, d.sha256, "
            "d.verdict, d.reviewer, d.reason, d.decided_at, d.method, d.nonce, d.assertion, d.key_id, d.signature "
            "FROM decision d JOIN proposal p ON p.id = d.proposal_id WHERE p.id = ?",
            (proposal_id,),
        ).fetchone()
    finally:
        conn.close()
    assertion_sha = None if row[15] is None else hashlib.sha256(row[15].encode()).hexdigest()
    return DecisionFacts(*row[:15], assertion_sha256=assertion_sha), row[16], row[17]


def predate_keys(home: Home) -> None:
    """Record every decision id as made before the home's Ed25519 keys: HMAC rows written by a test
    then stand for decisions an older Gatekeeper signed (``Keys.legacy_hmac_until``)."""
    (home.keys.folder / "hmac-until").write_text(f"{10**9}\n")
