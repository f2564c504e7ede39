"""What the reviewer reads in a real browser is what will be written: runs of spaces stay runs, and
invisible characters are marked and counted (issue 9, items 1 and 2).

The proposals are stored directly, as a database written before paths.py refused such names would
hold them: the page must not hide what an older or buggier intake let through.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gatekeeper.home import Home
from gatekeeper.store.store import Store
from tests.helpers import draft
from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS, PASSWORD, Page, hashed, review_app, review_server

PATH = "notes/q3  report.md"  # two spaces: "notes/q3 report.md" is another (existing) file
CONTENT = "total:  42\nok\u2800\u3164\ufe0f\n"  # two spaces, then three invisible characters
ARGUMENTS = {"path": PATH, "content": CONTENT}


@pytest.fixture
def proposal_id(home: Home) -> str:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        return store.propose(draft(PATH, CONTENT.encode(), arguments=ARGUMENTS)).id


def test_page_html_marks_counts_and_keeps_spaces(home: Home, proposal_id: str) -> None:
    """The same facts in the HTML (the app in-process), so they are checked even where Chromium is missing."""
    with review_app(home) as site:
        page = Page(site)
        assert page.login().status_code == 303
        html = page.client.get(f"/proposals/{proposal_id}").text
        css = page.client.get("/static/review.css").text
    assert re.search(r'id="invisible-total"><strong>3 invisible characters</strong>', html)
    # Once, in the content: the "content" argument is the same bytes, and says so instead of repeating them.
    assert html.count("⟨U+2800 BRAILLE PATTERN BLANK⟩") == 1
    assert html.count("⟨U+3164 HANGUL FILLER⟩") == 1 and html.count("⟨U+FE0F VARIATION SELECTOR-16⟩") == 1
    assert '&#34;content&#34;: <span class="repeat">⟨the content shown above (23 bytes)⟩</span>,' in html
    assert '<code class="path" id="destination">notes/q3  report.md</code>' in html
    assert re.search(r"\.path[^{]*\{[^}]*white-space: pre-wrap", css)


def test_spaces_and_invisible_characters_as_a_browser_shows_them(home: Home, proposal_id: str) -> None:
    require_chromium()
    from playwright.sync_api import sync_playwright

    shots = Path(__file__).resolve().parent.parent / "test-output" / "test_review_browser_text"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    with review_server(home) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{base}/login")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
            row = page.locator("table.queue a", has_text="notes/q3")
            assert row.inner_text() == PATH  # innerText follows CSS: collapsed spaces would read as one
            page.screenshot(path=str(shots / "queue.png"), full_page=True)

            row.click()
            page.wait_for_url(f"{base}/proposals/{proposal_id}")
            assert page.inner_text("#destination") == PATH
            assert page.inner_text("#approve").endswith(f"bytes at {PATH}")
            white_space = "el => getComputedStyle(el).whiteSpace"
            assert page.eval_on_selector("#destination", white_space) == "pre-wrap"
            assert page.eval_on_selector("#content td.code", white_space) == "pre-wrap"
            assert page.eval_on_selector("#arguments td.code", white_space) == "pre-wrap"

            content = page.inner_text("#content")
            assert "total:  42" in content
            assert "ok⟨U+2800 BRAILLE PATTERN BLANK⟩⟨U+3164 HANGUL FILLER⟩⟨U+FE0F VARIATION SELECTOR-16⟩" in content
            assert page.locator("#content mark.hidden").count() == 3
            assert page.locator("#arguments mark.hidden").count() == 0  # the content argument is not repeated
            assert '"path": "notes/q3  report.md"' in page.inner_text("#arguments")
            total = page.inner_text("#invisible-total")
            assert total.startswith("3 invisible characters") and "3 in the content, 0 in the arguments" in total
            summary = page.inner_text("#hidden-summary")
            assert "U+2800 BRAILLE PATTERN BLANK × 1" in summary and "U+3164 HANGUL FILLER × 1" in summary
            page.screenshot(path=str(shots / "proposal.png"), full_page=True)
        finally:
            browser.close()
    assert (shots / "proposal.png").stat().st_size > 1000
