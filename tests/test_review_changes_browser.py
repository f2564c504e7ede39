"""A change proposal in a real browser (Playwright driving Debian's headless Chromium): the reviewer
reads the diff with its line numbers and hidden characters, approves it, and the decision binds
the mode and the base."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatekeeper.home import Home
from gatekeeper.store.store import Store
from tests.helpers import draft
from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS, PASSWORD, hashed, review_server
from tests.test_review_browser import log_in

BASE = "".join(f"Line {i}: the meeting notes as they stand\n" for i in range(1, 21)).encode()
RESULT = (
    BASE.replace(b"Line 7: the meeting notes as they stand\n", "Line 7: moved to Thursday\u200b\n".encode()).replace(
        b"Line 15: the meeting notes as they stand\n", b""
    )
    + b"Line 21: new action item\n"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def test_edit_approved_in_a_real_browser(home: Home, tmp_path: Path, browser: object) -> None:
    shots = Path(__file__).resolve().parent.parent / "test-output" / "test_edit_approved_in_a_real_browser"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "meeting.md").write_bytes(BASE)
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        d = draft("notes/meeting.md", RESULT)
        p = store.propose(dataclasses.replace(d, workspace=str(ws), mode="edit", base=BASE, tool="edit_file"))
    with review_server(home) as base:
        page = browser.new_page()  # type: ignore[attr-defined]
        log_in(page, base)
        queue_row = page.locator("table.queue tr", has=page.locator("text=notes/meeting.md"))
        assert queue_row.locator(".mode").inner_text().lower() == "edit"
        assert "811 → 784 bytes (−27 bytes)" in queue_row.inner_text()
        page.screenshot(path=str(shots / "queue.png"), full_page=True)
        page.click("text=notes/meeting.md")
        page.wait_for_url(f"{base}/proposals/{p.id}")
        assert "Edit notes/meeting.md" in page.inner_text("#mode-banner")
        assert "+2 −2 lines" in page.inner_text("#mode-banner")
        removed = page.locator("#diff tr.removed")
        added = page.locator("#diff tr.added")
        assert [removed.nth(i).locator("td").all_inner_texts() for i in range(removed.count())] == [
            ["7", "", "−", "Line 7: the meeting notes as they stand"],
            ["15", "", "−", "Line 15: the meeting notes as they stand"],
        ]
        assert [added.nth(i).locator("td").all_inner_texts() for i in range(added.count())] == [
            ["", "7", "+", "Line 7: moved to Thursday⟨U+200B ZERO WIDTH SPACE⟩"],
            ["", "20", "+", "Line 21: new action item"],
        ]
        assert removed.first.is_visible() and added.first.is_visible()
        assert page.locator("#stale").count() == 0
        page.screenshot(path=str(shots / "edit-proposal.png"), full_page=True)

        page.fill("#approve-password", PASSWORD)
        page.click("#approve")
        page.wait_for_url(f"{base}/proposals/{p.id}")
        assert page.inner_text("#status") == "approved"
        page.close()
    conn = sqlite3.connect(home.db_path)
    try:
        row = conn.execute("SELECT verdict, mode, base_sha256 FROM decision WHERE proposal_id = ?", (p.id,)).fetchone()
    finally:
        conn.close()
    assert row == ("approved", "edit", hashlib.sha256(BASE).hexdigest())
    assert (shots / "edit-proposal.png").stat().st_size > 1000
