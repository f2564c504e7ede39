"""The review page as a person meets it on a laptop (1280 px) and a phone (390 px), in Chromium
(issue 24, items 6 and 7): a 198 KB create is shown once and folded, its approve button is in the
first screenful, and nothing runs off the right edge of a phone.

Screenshots land in test-output/test_review_layout_browser/ (git-ignored) to be looked at.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.store.store import Store
from tests.helpers import draft, make_home
from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS, hashed, review_server
from tests.test_review_browser import log_in

SHOTS = Path(__file__).resolve().parent.parent / "test-output" / "test_review_layout_browser"
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
# The 198 KB create's page was 82,753 px high at 1280 px and 246,560 px at 390 px (content twice, unfolded).
TALLEST = {1280: 8_000, 390: 15_000}
LAST_LINE = "The last line of the big note: 7f3a-end-marker"


def big_note() -> bytes:
    """A 198 KB Markdown note of 2,475 lines, ending in a line found nowhere else."""
    lines = [
        f"{i:05d} - the quarterly planning notes, one line of many, padded to eighty bytes ....\n" for i in range(2474)
    ]
    text = "".join(lines)[: 198_000 - len(LAST_LINE) - 2] + "\n" + LAST_LINE + "\n"
    return text.encode()


@dataclasses.dataclass(frozen=True)
class Site:
    base: str
    big: str  # the 198 KB create's id
    small: str  # a small create with a long actor in its history
    edit: str  # a change to an existing file: a diff


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    require_chromium()

    root = tmp_path_factory.mktemp("layout")
    home = make_home(root / "home")
    (root / "ws" / "notes").mkdir(parents=True)
    base = "".join(f"Line {i}: the meeting notes as they stand, long enough to wrap on a phone\n" for i in range(40))
    (root / "ws" / "notes" / "meeting.md").write_text(base)
    result = base.replace("Line 7: the meeting", "Line 7: the revised meeting")
    deep = "notes/" + "/".join(["quarterly-planning-documents"] * 3) + "/summary-of-the-meeting.md"
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        big = store.propose(draft("notes/big.md", big_note()))
        small = store.propose(draft(deep, b"short\n"), actor="proxy:01M8SXRCEQANEWNTXXE621W3KA")
        d = dataclasses.replace(
            draft("notes/meeting.md", result.encode()), workspace=str(root / "ws"), mode="edit", base=base.encode()
        )
        edit = store.propose(d)
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    with review_server(home) as base:
        yield Site(base, big.id, small.id, edit.id)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def tab(chromium: Any, site: Site, viewport: dict[str, int]) -> Any:
    page = chromium.new_page(viewport=viewport)
    log_in(page, site.base)
    return page


def page_width(page: Any) -> int:
    return int(page.evaluate("document.scrollingElement.scrollWidth"))


def in_view(page: Any, selector: str, viewport: dict[str, int]) -> None:
    """The element's whole box lies in the first screenful, and it is what a tap there hits."""
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], f"{selector} is off to the side: {box}"
    assert box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"], f"{selector} is below the fold: {box}"
    hit = page.evaluate(
        "([s, x, y]) => document.querySelector(s).contains(document.elementFromPoint(x, y))",
        [selector, box["x"] + box["width"] / 2, box["y"] + box["height"] / 2],
    )
    assert hit, f"{selector} is covered by something else"


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280", "390"])
def test_a_198_kb_create_is_shown_once_folded_with_approve_in_reach(
    chromium: Any, site: Site, viewport: dict[str, int]
) -> None:
    page = tab(chromium, site, viewport)
    page.goto(f"{site.base}/proposals/{site.big}")
    name = f"big-{viewport['width']}"
    page.screenshot(path=str(SHOTS / f"{name}-first-screen.png"))
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    height = int(page.evaluate("document.scrollingElement.scrollHeight"))
    print(f"{viewport['width']} px: the 198 KB create's page is {height} px high")
    assert height < TALLEST[viewport["width"]], f"the page is {height} px high"
    assert page_width(page) <= viewport["width"]
    # The content once: the arguments name it instead of repeating it as one JSON string.
    assert page.evaluate("t => document.body.textContent.split(t).length - 1", LAST_LINE) == 1
    assert "the content shown above" in page.inner_text("#arguments")
    in_view(page, "#approve", viewport)
    in_view(page, "#approve-password", viewport)
    # "Show all" unfolds the rest without a script (the CSP allows none inline); the whole file is a link away.
    assert not page.get_by_text(LAST_LINE).is_visible()
    page.locator("#content-fold").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"{name}-fold.png"))
    page.click("#content-fold summary")
    assert page.get_by_text(LAST_LINE).is_visible()
    assert page.locator("#content-fold a[href$='/file']").count() == 1
    page.close()


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390", "1280"])
def test_nothing_runs_off_a_phone(chromium: Any, site: Site, viewport: dict[str, int]) -> None:
    page = tab(chromium, site, viewport)
    width = viewport["width"]
    page.goto(f"{site.base}/?status=all")
    page.screenshot(path=str(SHOTS / f"queue-{width}.png"), full_page=True)
    assert page_width(page) <= width, f"the queue is {page_width(page)} px wide in a {width} px window"
    row = page.locator("table.queue tbody tr", has=page.locator("text=notes/big.md"))
    for cell in ("td.dest > a[href*='/proposals/']", ".mode"):  # the destination and the change
        box = row.locator(cell).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, f"{cell}: {box}"
    page.goto(f"{site.base}/proposals/{site.small}")
    page.screenshot(path=str(SHOTS / f"proposal-{width}.png"), full_page=True)
    assert page_width(page) <= width, f"the proposal is {page_width(page)} px wide in a {width} px window"
    page.locator("#history").screenshot(path=str(SHOTS / f"history-{width}.png"))
    # The history's actor reads as a word, not one character per line.
    actor = "#history tbody:first-child tr:first-child td:nth-child(4)"
    assert page.inner_text(actor) == "proxy:01M8SXRCEQANEWNTXXE621W3KA"
    box = page.locator(actor).bounding_box()
    assert box is not None and box["width"] >= 120, f"the actor column is {box} wide"
    line = float(page.evaluate("s => parseFloat(getComputedStyle(document.querySelector(s)).lineHeight) || 20", actor))
    assert box["height"] <= 2.5 * line, f"the actor wraps into {box['height'] / line:.0f} lines"
    page.goto(f"{site.base}/proposals/{site.edit}")
    page.screenshot(path=str(SHOTS / f"edit-{width}.png"), full_page=True)
    assert page_width(page) <= width, f"the edit's page is {page_width(page)} px wide in a {width} px window"
    assert page.locator("#diff tr.added").count() == 1
    page.close()
