"""Approval benchmark (issue 14): from pressing Approve to the decision recorded, in Chromium.

Two reviewers on the real review server (``python -m gatekeeper review``): one approves with a
passkey (Chromium's virtual authenticator: challenge, ``navigator.credentials.get``, assertion
posted, verified in the deciding transaction), one with the password form (argon2id step-up, the
default cost). The baseline, "today's" press-to-recorded before issue 14, is the same form post
with the session alone: a rejection (an approval needed nothing more then). Each timed decision is
one click, ended by polling the database for the decision row. The target: a passkey approval
costs less than 100 ms on top of that baseline at p50.

    .venv/bin/python bench/approve_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from harness import Figure, draft, log, make_home, p50, standalone

from gatekeeper.review.auth import hash_password
from gatekeeper.store.store import Store

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
PASSWORD = "correct horse battery staple"
EXTRA_MS = 100.0  # what a passkey may add to a session-only decision's p50


@dataclass(frozen=True)
class Sizes:
    warmup: int
    approvals: int  # timed, per reviewer


FULL_SIZES, QUICK_SIZES = Sizes(warmup=3, approvals=30), Sizes(warmup=1, approvals=8)


@dataclass
class Skipped(Figure):
    """A row that could not be measured here (no Chromium): shown as skipped, never a failure."""

    @property
    def shown(self) -> str:
        return f"skipped: {self.note[:70]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def review_server(home: Path) -> Iterator[str]:
    port = free_port()
    with open(home / "review.log", "ab") as out:
        argv = [sys.executable, "-m", "gatekeeper", "--home", str(home), "review", "--port", str(port)]
        proc = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/login", timeout=1)
                    break
                except httpx.TransportError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError((home / "review.log").read_text()[-2000:]) from None
                    time.sleep(0.05)
            yield f"http://localhost:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def decided(db: Path, proposal_id: str, timeout: float = 30) -> None:
    """Return once the decision row is in the database (polled, 1 ms apart)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        deadline = time.monotonic() + timeout
        while conn.execute("SELECT 1 FROM decision WHERE proposal_id = ?", (proposal_id,)).fetchone() is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"proposal {proposal_id} was not decided within {timeout} s")
            time.sleep(0.001)
    finally:
        conn.close()


def passkey_page(browser: Any, base: str, token: str) -> Any:
    """A tab whose virtual authenticator enrolled on ``token`` and logged in with the passkey."""
    page = browser.new_context().new_page()
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable", {"enableUI": False})
    options = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True}
    cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {"options": {**options, "isUserVerified": True, "automaticPresenceSimulation": True}},
    )
    page.goto(f"{base}/enrol/{token}")
    page.click("#enrol-button")
    page.wait_for_selector("#enrol-done:not([hidden])")
    page.goto(f"{base}/login")
    page.click("#passkey-login")
    page.wait_for_url(f"{base}/")
    return page


def password_page(browser: Any, base: str) -> Any:
    page = browser.new_context().new_page()
    page.goto(f"{base}/login")
    page.fill("input[name=username]", "pw")
    page.fill("input[name=password]", PASSWORD)
    page.click("form.login button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def timed(page: Any, base: str, db: Path, ids: list[str], how: str) -> list[float]:
    """Milliseconds from the click to the decision row, per proposal; ``how``: passkey, password or reject."""
    times = []
    for pid in ids:
        page.goto(f"{base}/proposals/{pid}")
        if how == "password":
            page.fill("#approve-password", PASSWORD)
        elif how == "reject":
            page.fill("#reason", "not now")
        start = time.perf_counter()
        page.click("#reject" if how == "reject" else "#approve")
        decided(db, pid)
        times.append((time.perf_counter() - start) * 1000)
        page.wait_for_selector("#status:not(:text('pending'))")  # the page's own reload, before the next goto
    return times


def run_in(work: Path, sizes: Sizes) -> list[Figure]:
    if not Path(CHROMIUM).exists():
        return [Skipped("A1. approve rows", 0.0, "", note=f"no Chromium at {CHROMIUM} (`make browser`)")]
    from playwright.sync_api import sync_playwright

    home = make_home(work / "home")
    n = sizes.warmup + sizes.approvals
    with Store(home.db_path) as store:
        for name in ("pk", "pw"):
            store.add_reviewer(name, hash_password(PASSWORD))
        spec = dict(tool="create_note", workspace=str(work / "ws"), ttl=timedelta(hours=1), session="bench")
        ids = [store.propose(draft(f"notes/a{i}.md", b"approve me\n", **spec)).id for i in range(3 * n)]  # type: ignore[arg-type]
        token = store.issue_enrolment("pk", actor="bench")
    with review_server(home.path) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            log(f"A1: {sizes.approvals} approvals each, passkey and password, in Chromium")
            page = passkey_page(browser, base, token)
            with_passkey = timed(page, base, home.db_path, ids[:n], "passkey")
            session_only = timed(page, base, home.db_path, ids[n : 2 * n], "reject")
            with_password = timed(password_page(browser, base), base, home.db_path, ids[2 * n :], "password")
        finally:
            browser.close()
    pk, pw, bare = (p50(xs[sizes.warmup :]) for xs in (with_passkey, with_password, session_only))
    return [
        Figure("A1. decide with the session only p50", bare, "ms", note="a rejection: an approval before issue 14"),
        Figure("A1. approve with passkey p50", pk, "ms"),
        Figure("A1. approve with password form p50", pw, "ms", note="argon2id step-up at the default cost"),
        Figure("A1. passkey on top of session only p50", pk - bare, "ms", EXTRA_MS, "<"),
    ]


def run(quick: bool, work: Path | None = None) -> list[Figure]:
    """The rows for bench/run.py's table, built in a fresh ``approve-bench/`` of ``work`` (or a temp folder)."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    if work is not None:
        base = work / "approve-bench"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        return run_in(base, sizes)
    with tempfile.TemporaryDirectory(prefix="gatekeeper-approve-bench-") as tmp:
        return run_in(Path(tmp), sizes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few approvals: a smoke test")
    args = parser.parse_args(argv)
    return standalone("gatekeeper-approve-bench-", args.quick, lambda quick, work: run(quick, work))


if __name__ == "__main__":
    sys.exit(main())
