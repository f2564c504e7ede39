"""The review page in a real browser: Playwright driving Debian's headless Chromium."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from gatekeeper.store.store import Store
from tests.helpers import draft
from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS, PASSWORD, decisions, hashed, review_server


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Path:
    folder = Path(__file__).resolve().parent.parent / "test-output" / request.node.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def log_in(page: Any, base: str) -> None:
    """Through the log-in form, as a person would: the queue first sends the browser there."""
    page.goto(f"{base}/")
    assert page.url.endswith("/login")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def assert_tricky_marked(page: Any, sha256: str) -> None:
    """The tricky proposal's page: every hidden character marked, in the content and the arguments."""
    summary = page.inner_text("#hidden-summary")
    assert "U+202E RIGHT-TO-LEFT OVERRIDE × 1" in summary and "U+200B ZERO WIDTH SPACE × 1" in summary
    assert "bidirectional" in summary
    marks = page.locator("#content mark.hidden")
    assert marks.count() == 5
    assert page.locator("#content mark.bidi").count() == 4
    assert page.inner_text("#sha256") == sha256
    assert page.inner_text("#destination") == "notes/tricky.md"
    rlo, lri = "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩", "⟨U+2066 LEFT-TO-RIGHT ISOLATE⟩"
    pdi, rli = "⟨U+2069 POP DIRECTIONAL ISOLATE⟩", "⟨U+2067 RIGHT-TO-LEFT ISOLATE⟩"
    zwsp = "⟨U+200B ZERO WIDTH SPACE⟩"
    assert page.locator("#content td.code").all_inner_texts() == [
        "total = 100",
        f"# admin{rlo} {lri}// check later{pdi} {rli}",
        f"ok{zwsp}ay = True",
    ]
    # The arguments as the host sent them, but the body is the content: it says so instead of showing
    # the same bytes (and their marks) a second time as one JSON string.
    assert page.locator("#arguments td.code").all_inner_texts() == [
        "{",
        '  "body": ⟨the content shown above (63 bytes)⟩,',
        '  "title": "tricky"',
        "}",
    ]
    arguments = page.locator("section", has=page.locator("#arguments"))
    assert "The arguments hold" not in arguments.inner_text()
    assert page.locator("#arguments mark.hidden").count() == 0


def test_review_in_a_real_browser(home: Home, browser: object, shots: Path) -> None:
    tricky = "total = 100\n# admin\u202e \u2066// check later\u2069 \u2067\nok\u200bay = True\n".encode()
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        # What the repo policy's create_note receives for this note: {"title", "body"} as the host sent them.
        sent = {"title": "tricky", "body": tricky.decode("utf-8")}
        a = store.propose(draft("notes/tricky.md", tricky, arguments=sent))
        b = store.propose(draft("notes/other.md", "other — café\n".encode()))  # default arguments
    with review_server(home) as base:
        page = browser.new_page()  # type: ignore[attr-defined]
        log_in(page, base)
        assert page.inner_text("#pending-count") == "2 pending"
        page.screenshot(path=str(shots / "queue.png"), full_page=True)

        page.click("text=notes/tricky.md")
        page.wait_for_url(f"{base}/proposals/{a.id}")
        assert_tricky_marked(page, a.sha256)
        page.screenshot(path=str(shots / "proposal.png"), full_page=True)

        page.fill("#approve-password", PASSWORD)
        page.click("#approve")
        page.wait_for_url(f"{base}/proposals/{a.id}")
        assert page.inner_text("#status") == "approved"
        assert "approved" in page.inner_text("#decision")

        page.goto(f"{base}/proposals/{b.id}")
        assert page.locator("#arguments td.code").all_inner_texts() == [
            "{",
            '  "content": ⟨the content shown above (16 bytes)⟩,',
            '  "path": "notes/other.md"',
            "}",
        ]
        page.fill("#reason", "please put it under notes/drafts/")
        page.click("#reject")
        page.wait_for_url(f"{base}/proposals/{b.id}")
        assert page.inner_text("#status") == "rejected"
        assert "please put it under notes/drafts/" in page.inner_text("#decision")
        page.goto(f"{base}/")
        assert page.inner_text("#pending-count") == "0 pending"
        assert "audit verify: OK" in page.inner_text("#integrity")
        page.close()
    assert decisions(home) == [(a.id, "approved", "alice"), (b.id, "rejected", "alice")]
    assert (shots / "queue.png").stat().st_size > 1000 and (shots / "proposal.png").stat().st_size > 1000


def test_nothing_on_a_proposal_page_runs_past_the_right_edge(home: Home, browser: object, shots: Path) -> None:
    """The history's JSON payload holds long unbroken hashes: it must wrap, not widen the page."""
    deep = "notes/" + "/".join(["quarterly-planning-documents"] * 4) + "/summary-of-the-meeting.md"
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        a = store.propose(draft(deep, b"x" * 300), actor="proxy:01M8SXRCEQANEWNTXXE621W3KA")  # as the proxy signs
    with review_server(home) as base:
        page = browser.new_page(viewport={"width": 1024, "height": 768})  # type: ignore[attr-defined]
        log_in(page, base)
        for url in (f"{base}/", f"{base}/proposals/{a.id}"):
            page.goto(url)
            assert page.locator("#history td").count() > 0 or url.endswith("/")
            widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            page.screenshot(path=str(shots / ("queue.png" if url.endswith("/") else "proposal.png")), full_page=True)
            assert widths[0] <= widths[1], f"{url}: the page is {widths[0]} px wide in a {widths[1]} px window"
        assert a.sha256 in page.inner_text("#history").replace("\n", "")  # wrapped, still all there
        page.close()
