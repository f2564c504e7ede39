"""End to end with real parts only: `gatekeeper up` (the real review page and committer), the
proxy driven by the official SDK client, real downstream servers, and Chromium doing the
person's part through the review page."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS, free_port, start_up

PASSWORD = "interop password 123"  # the reviewer `gatekeeper up` creates; approving asks for it again


@dataclass
class Stack:
    home: Path
    base: str
    login_link: str
    output: list[str]


@pytest.fixture
def stack_for(tmp_path: Path) -> Iterator[object]:
    """Start `gatekeeper up` for a policy; stop it at the end of the test."""
    procs: list[subprocess.Popen[str]] = []
    drains: list[threading.Thread] = []

    def start(policy: Path) -> Stack:
        home, port = tmp_path / "home", free_port()
        text = policy.read_text()
        if "review_url:" not in text:
            policy.write_text(text.replace("version: 1\n", f"version: 1\nreview_url: http://localhost:{port}\n", 1))
        proc = start_up(home, port, policy, PASSWORD)
        procs.append(proc)
        assert proc.stdout is not None
        output: list[str] = []
        link = ""
        for line in proc.stdout:
            output.append(line.rstrip())
            if m := re.search(r"(http://localhost:\d+/login/link\?token=\S+)", line):
                link = m.group(1)
            if "Ctrl-C stops" in line:
                break
        assert link, "\n".join(output)

        def drain() -> None:
            with proc.stdout:  # type: ignore[union-attr]  # closed here at end of file, not by the collector
                for line in proc.stdout:  # type: ignore[union-attr]
                    output.append(line.rstrip())

        drains.append(threading.Thread(target=drain, daemon=True))
        drains[-1].start()
        return Stack(home, f"http://localhost:{port}", link, output)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)
    for thread in drains:
        thread.join(timeout=10)  # each ends at EOF and closes its stdout
    for proc in procs[len(drains) :]:  # started, but failed before its drain began: close it here,
        if proc.stdout is not None:  # not in the garbage collector during some later test
            proc.stdout.close()


class BrowserWorker:
    """Playwright's sync API in a thread of its own: the async tests' event loop runs in the main one."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]] | None] = queue.Queue()
        self._started: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, name="chromium", daemon=True)
        self._thread.start()
        self._started.result(timeout=60)

    def _run(self) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                self._started.set_result(None)
                while (job := self._jobs.get()) is not None:
                    fn, args, future = job
                    try:
                        future.set_result(fn(browser, *args))
                    except BaseException as exc:  # handed to the test that asked
                        future.set_exception(exc)
                browser.close()
        except BaseException as exc:
            if not self._started.done():
                self._started.set_exception(exc)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        future: Future[Any] = Future()
        self._jobs.put((fn, args, future))
        return future.result(timeout=120)

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)


@pytest.fixture(scope="session")
def browser() -> Iterator[BrowserWorker]:
    require_chromium()
    worker = BrowserWorker()
    yield worker
    worker.close()


def _decide(browser: Any, stack: Stack, proposal_id: str, reason: str | None) -> str:
    context = browser.new_context()
    page = context.new_page()
    page.goto(stack.login_link)
    page.goto(f"{stack.base}/proposals/{proposal_id}")
    if reason is None:
        page.fill("#approve-password", PASSWORD)  # the step-up: the session alone never approves
        page.click("#approve")
    else:
        page.fill("#reason", reason)
        page.click("#reject")
    page.wait_for_selector("#decision")
    status = page.inner_text("#status")
    context.close()
    return str(status)


def decide_in_browser(browser: BrowserWorker, stack: Stack, proposal_id: str, reason: str | None = None) -> str:
    """Log in with the printed one-time link and approve (or reject with a reason) on the page."""
    return str(browser.call(_decide, stack, proposal_id, reason))


@pytest.fixture
def home_for_git(tmp_path: Path) -> Path:
    from tests.helpers import make_home

    return make_home(tmp_path / "home").path
