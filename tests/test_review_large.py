"""Large proposals on the review page, and times and sizes as people read them (issue 24, items 6
and 8): the HTML of the real app in-process. The browser side (heights, the sticky decide bar, a
phone's width) is in test_review_layout_browser.py.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatekeeper.home import Home
from gatekeeper.review.change import size_change
from gatekeeper.review.render import FOLD_CHARS, FOLD_ROWS
from gatekeeper.store.store import Store
from tests.helpers import draft
from tests.review_support import Page, hashed, review_app

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"
TIME = rf'<time datetime="({ISO})" title="\w{{3}} \d+ \w{{3}} \d\d:\d\d · \1">'


@pytest.fixture
def page(home: Home) -> Iterator[Page]:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
    with review_app(home) as site:
        p = Page(site)
        assert p.login().status_code == 303
        yield p


def test_a_198_kb_create_shows_its_content_once_folded(home: Home, page: Page) -> None:
    body = b"".join(
        b"%05d the quarterly planning notes, padded to eighty bytes ....................\n" % i for i in range(2475)
    )
    assert len(body) == 198_000
    with Store(home.db_path) as store:
        p = store.propose(draft("notes/big.md", body))
    html = page.client.get(f"/proposals/{p.id}").text
    assert html.count("02474 the quarterly planning notes") == 1  # the arguments do not repeat it
    assert '&#34;content&#34;: <span class="repeat">⟨the content shown above (198 KB)⟩</span>,' in html
    shown, rest = html.split('id="content-fold"', 1)
    assert FOLD_CHARS == 16_000
    assert shown.count('<td class="ln">') == 202  # 16,000 characters of 79-character lines: a few screens
    assert "2,273 more lines folded below" in rest
    assert f'<a href="/proposals/{p.id}/file">the whole file on its own page</a>' in rest
    assert '<summary><span class="show-all">Show all 2,475 lines</span></summary>' in rest
    assert re.search(r'<td class="ln">2475</td>', rest)  # the rest numbered on, in the same page
    assert "198 KB · 198,000 bytes (text)" in html
    whole = page.client.get(f"/proposals/{p.id}/file").text
    assert "content-fold" not in whole and whole.count('<td class="ln">') == 2475  # the whole-file page unfolds


def test_a_long_diff_folds_and_names_the_invisible_characters_it_folds(home: Home, page: Page, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    base = b"".join(b"line %d\n" % i for i in range(600))
    result = b"".join(b"LINE %d\xe2\x80\x8b\n" % i for i in range(600))  # every line changed, a U+200B in each
    (ws / "notes/a.md").write_bytes(base)
    d = dataclasses.replace(draft("notes/a.md", result), workspace=str(ws), mode="replace", base=base)
    with Store(home.db_path) as store:
        p = store.propose(d)
    html = page.client.get(f"/proposals/{p.id}").text
    head, rest = html.split('id="diff-fold"', 1)
    assert head.count('<tr class="') == FOLD_ROWS
    assert "<strong>600 invisible characters</strong> among them" in rest  # none of the 600 is above the fold
    assert rest.count('<tr class="added">') == 600 and '<span class="show-all">Show the whole diff</span>' in rest
    assert "5.3 KB → 7.1 KB (+1.8 KB)" in html  # the mode banner, in sizes a person reads


def test_times_read_as_how_long_ago_with_the_exact_instant_in_a_tooltip(home: Home, page: Page) -> None:
    with Store(home.db_path) as store:
        p = store.propose(draft("notes/a.md", b"x" * 198_000))
    queue = page.client.get("/").text
    row = queue.split(f"/proposals/{p.id}", 1)[0].rsplit("<tr", 1)[1]
    assert re.search(rf'<td class="created">{TIME}just now</time></td>', row), row
    assert '<td class="size" title="198,000 bytes">198 KB</td>' in queue
    html = page.client.get(f"/proposals/{p.id}").text
    assert re.search(rf'<td id="created">{TIME}just now</time> <span class="local">\(', html)
    assert re.search(rf'<td id="expires">{TIME}in 60 min</time>', html)
    history = html.split('id="history"', 1)[1]
    assert re.search(rf"<tr><td>\d+</td><td>{TIME}just now</time> <span class=\"local\">", history)


def test_a_change_in_size_reads_in_units_and_exactly_where_rounding_would_hide_it() -> None:
    assert size_change(None, 198_000) == "198 KB"
    assert size_change(71, 83) == "71 → 83 bytes (+12 bytes)"
    assert size_change(1_204, 1_310) == "1.2 KB → 1.3 KB (+106 bytes)"
    assert size_change(2_910, 2_918) == "2,910 → 2,918 bytes (+8 bytes)"
    assert size_change(250_000, 0) == "250 KB → 0 bytes (−250 KB)"


def test_a_long_delete_folds_the_bytes_it_removes(home: Home, page: Page, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    base = b"".join(b"line %d\n" % i for i in range(600))
    (ws / "notes/a.md").write_bytes(base)
    d = dataclasses.replace(draft("notes/a.md", b""), workspace=str(ws), mode="delete", base=base)
    with Store(home.db_path) as store:
        p = store.propose(d)
    html = page.client.get(f"/proposals/{p.id}").text
    head, rest = html.split('id="deleted-fold"', 1)
    folded = rest.split("</details>", 1)[0]
    assert head.count('<td class="ln">') == FOLD_ROWS and folded.count('<td class="ln">') == 600 - FOLD_ROWS
    assert f"{600 - FOLD_ROWS} more lines folded below</p>" in rest  # no whole-file link: nothing would remain
