"""The review page for changes to existing files: the diff a reviewer reads (line numbers, added and
removed lines, hidden characters marked on both sides, counts), a delete's bytes, a binary file's
hex, the warning when the file changed since the proposal, and a decision bound to mode and base.

Proposals are made through the real store (as the proxy will) over files in a real workspace; the
page is the real app in-process, spoken to like its browser tab.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gatekeeper.home import Home
from gatekeeper.store.store import Proposed, Store
from tests.helpers import draft, signed_decision
from tests.review_support import PASSWORD, InProcess, Page, decisions, event_count, hashed, review_app

TEN = b"".join(b"line %d\n" % i for i in range(1, 11))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    return ws


@pytest.fixture
def site(home: Home) -> Iterator[InProcess]:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
    with review_app(home) as app:
        yield app


@pytest.fixture
def page(site: InProcess) -> Page:
    p = Page(site)
    assert p.login().status_code == 303
    return p


def propose(
    home: Home, ws: Path, path: str, mode: str, base: bytes | None, result: bytes, *, on_disk: bool = True
) -> Proposed:
    """A change proposal as the proxy records it; the base is also what the file holds on disk."""
    if on_disk and base is not None:
        (ws / path).write_bytes(base)
    d = dataclasses.replace(draft(path, result), workspace=str(ws), mode=mode, base=base, tool="edit_file")
    with Store(home.db_path) as store:
        return store.propose(d)


def approve(page: Page, p: Proposed, path: str, **fields: str) -> httpx.Response:
    """The approve form as the page posts it, with the given mode and base fields."""
    data = {"csrf_token": page.csrf(p.id), "sha256": p.sha256, "path": path, "password": PASSWORD, **fields}
    return page.client.post(f"/proposals/{p.id}/approve", data=data)


def rows(text: str, table: str = "diff") -> list[tuple[str, str, str, str]]:
    """The diff table's rows as (kind, old number, new number, visible text with marks)."""
    body = text.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    out = []
    for kind, old, new, code in re.findall(
        r'<tr class="(\w+)"><td class="ln old">(\d*)</td><td class="ln new">(\d*)</td><td class="sign">[^<]*</td>'
        r'<td class="code">(.*?)</td></tr>',
        body,
    ):
        out.append((kind, old, new, html.unescape(re.sub(r"<[^>]+>", "", code))))
    return out


def test_edit_shows_the_diff_with_line_numbers_and_counts(home: Home, workspace: Path, page: Page) -> None:
    result = TEN.replace(b"line 5\n", b"line five\nline 5.5\n")
    p = propose(home, workspace, "notes/a.md", "edit", TEN, result)
    text = page.client.get(f"/proposals/{p.id}").text
    assert 'id="mode">edit</span>' in text
    assert "<strong>Edit</strong>" in text and "71 → 83 bytes (+12 bytes)" in text
    assert re.search(r'<span class="added-count">\+2</span> <span class="removed-count">−1</span>', text)
    assert rows(text) == [
        ("context", "2", "2", "line 2"),
        ("context", "3", "3", "line 3"),
        ("context", "4", "4", "line 4"),
        ("removed", "5", "", "line 5"),
        ("added", "", "5", "line five"),
        ("added", "", "6", "line 5.5"),
        ("context", "6", "7", "line 6"),
        ("context", "7", "8", "line 7"),
        ("context", "8", "9", "line 8"),
    ]
    assert "@@ -2,7 +2,8 @@" in text
    assert 'id="stale"' not in text  # the file on disk is still the base
    assert "still the base" in text
    # The form posts back everything the decision binds.
    for name, value in (("mode", "edit"), ("base_sha256", hashlib.sha256(TEN).hexdigest()), ("sha256", p.sha256)):
        assert text.count(f'name="{name}" value="{value}"') == 2  # approve and reject
    whole = page.client.get(f"/proposals/{p.id}/file").text
    assert f'href="/proposals/{p.id}/file"' in text
    assert "line five" in whole and "line 10" in whole


def test_hidden_characters_are_marked_on_both_sides(home: Home, workspace: Path, page: Page) -> None:
    base = "a\nok\u200bay\nz\n".encode()
    result = "a\nok\u202eay\nz\n".encode()
    p = propose(home, workspace, "notes/a.md", "replace", base, result)
    text = page.client.get(f"/proposals/{p.id}").text
    assert rows(text) == [
        ("context", "1", "1", "a"),
        ("removed", "2", "", "ok⟨U+200B ZERO WIDTH SPACE⟩ay"),
        ("added", "", "2", "ok⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩ay"),
        ("context", "3", "3", "z"),
    ]
    summary = html.unescape(re.sub(r"<[^>]+>", "", text.split('id="hidden-summary"', 1)[1].split("</p>", 1)[0]))
    assert "removed lines: U+200B ZERO WIDTH SPACE × 1" in summary
    assert "added lines: U+202E RIGHT-TO-LEFT OVERRIDE × 1" in summary
    assert 'class="hidden bidi"' in text


def test_missing_final_newline_and_crlf_show(home: Home, workspace: Path, page: Page) -> None:
    p = propose(home, workspace, "notes/a.md", "append", b"a\r\nb", b"a\nb\n")
    text = page.client.get(f"/proposals/{p.id}").text
    cr = "⟨U+000D CARRIAGE RETURN⟩"
    assert rows(text) == [
        ("removed", "1", "", f"a{cr}"),
        ("removed", "2", "", "bno newline at end of file"),
        ("added", "", "1", "a"),
        ("added", "", "2", "b"),
    ]


def test_binary_change_says_so_with_bounded_hex(home: Home, workspace: Path, page: Page) -> None:
    base = bytes(range(256)) * 40  # 10 KiB, NULs: binary
    p = propose(home, workspace, "notes/a.bin", "replace", base, base[:100] + b"\xff")
    text = page.client.get(f"/proposals/{p.id}").text
    assert "binary, 10,240 bytes → 101 bytes" in text
    old_hex = text.split('id="hex-old">', 1)[1].split("</pre>", 1)[0]
    assert old_hex.count("\n") == 4096 // 16  # the first 4 KiB only
    assert "first 4096 of 10240 bytes" in text
    new_hex = text.split('id="hex-new">', 1)[1].split("</pre>", 1)[0]
    assert new_hex.splitlines()[-1].startswith("00000060  60 61 62 63 ff")


def test_delete_shows_the_bytes_that_will_go(home: Home, workspace: Path, page: Page) -> None:
    p = propose(home, workspace, "notes/gone.md", "delete", "keep me?\nno\u200b\n".encode(), b"")
    text = page.client.get(f"/proposals/{p.id}").text
    assert 'id="mode">delete</span>' in text and "The bytes that will be deleted" in text
    deleted = text.split('id="deleted"', 1)[1].split("</table>", 1)[0]
    assert "keep me?" in deleted and "U+200B ZERO WIDTH SPACE" in deleted
    assert "Approve deleting these 15 bytes at" in text


def test_stale_base_is_said_before_approval(home: Home, workspace: Path, page: Page) -> None:
    p = propose(home, workspace, "notes/a.md", "edit", TEN, TEN + b"more\n")
    (workspace / "notes/a.md").write_bytes(TEN.upper())  # same size, other bytes
    text = page.client.get(f"/proposals/{p.id}").text
    assert "Changed since proposed: approving will end in conflict." in text
    assert f"The file now has sha256 {hashlib.sha256(TEN.upper()).hexdigest()[:12]}…" in text
    (workspace / "notes/a.md").write_bytes(TEN + b"someone else\n")
    assert "The file is now 84 bytes, not 71" in page.client.get(f"/proposals/{p.id}").text
    (workspace / "notes/a.md").unlink()
    assert "The file is gone" in page.client.get(f"/proposals/{p.id}").text
    # Still decidable: the committer, not the page, ends it in conflict.
    assert 'id="approve"' in text
    approve(page, p, "notes/a.md", mode="edit", base_sha256=hashlib.sha256(TEN).hexdigest())
    assert decisions(home) == [(p.id, "approved", "alice")]


def test_create_over_something_that_now_exists_is_stale(home: Home, workspace: Path, page: Page) -> None:
    p = propose(home, workspace, "notes/new.md", "create", None, b"hello\n")
    assert 'id="stale"' not in page.client.get(f"/proposals/{p.id}").text
    (workspace / "notes/new.md").write_bytes(b"I was first\n")
    text = page.client.get(f"/proposals/{p.id}").text
    assert "Changed since proposed: approving will end in conflict." in text
    assert "A file now exists at the destination" in text


@pytest.mark.parametrize(
    ("mode", "base_sha256"), [("edit", "0" * 64), ("replace", None), ("create", None), ("", None), ("edit", "")]
)
def test_decision_with_wrong_mode_or_base_is_refused(
    home: Home, workspace: Path, page: Page, mode: str, base_sha256: str | None
) -> None:
    p = propose(home, workspace, "notes/a.md", "edit", TEN, TEN + b"x\n")
    real_base = hashlib.sha256(TEN).hexdigest()
    posted = {"mode": mode, "base_sha256": real_base if base_sha256 is None else base_sha256}
    response = approve(page, p, "notes/a.md", **posted)
    assert response.status_code == 409, response.text
    assert "reload the proposal page" in response.text
    assert decisions(home) == []
    assert event_count(home, "decision_refused") == 1


def test_approval_binds_and_signs_mode_and_base(home: Home, workspace: Path, page: Page) -> None:
    p = propose(home, workspace, "notes/a.md", "edit", TEN, TEN + b"x\n")
    base_sha = hashlib.sha256(TEN).hexdigest()
    response = approve(page, p, "notes/a.md", mode="edit", base_sha256=base_sha)
    assert response.status_code == 303, response.text
    row = _decision_row(home, p.id)
    assert (row["mode"], row["base_sha256"]) == ("edit", base_sha)
    facts, kid, signature = signed_decision(home, p.id)
    assert (facts.mode, facts.base_sha256, facts.method) == ("edit", base_sha, "password")
    keyring = home.keys.keyring()
    assert keyring.verify(kid, facts.message(kid), signature)
    assert not keyring.verify(kid, dataclasses.replace(facts, mode="replace").message(kid), signature)


def test_reject_posts_what_was_shown(home: Home, workspace: Path, page: Page) -> None:
    p = propose(home, workspace, "notes/a.md", "delete", TEN, b"")
    csrf = page.csrf(p.id)
    wrong = page.client.post(
        f"/proposals/{p.id}/reject",
        data={"reason": "no", "csrf_token": csrf, "sha256": p.sha256, "path": "notes/a.md", "mode": "replace"},
    )
    assert wrong.status_code == 409 and decisions(home) == []
    fields = {
        "sha256": p.sha256,
        "path": "notes/a.md",
        "mode": "delete",
        "base_sha256": hashlib.sha256(TEN).hexdigest(),
    }
    done = page.client.post(f"/proposals/{p.id}/reject", data={"reason": "keep it", "csrf_token": csrf, **fields})
    assert done.status_code == 303
    assert _decision_row(home, p.id)["mode"] == "delete"


def test_queue_shows_mode_and_size_change(home: Home, workspace: Path, page: Page) -> None:
    propose(home, workspace, "notes/a.md", "edit", TEN, TEN + b"x\n")
    propose(home, workspace, "notes/b.md", "create", None, b"hello\n")
    text = page.client.get("/").text
    assert re.search(
        r'<span class="mode mode-edit">edit</span></td>\s*<td class="path dest">.*?notes/a.md.*?</td>\s*'
        r'<td class="size" title="73 bytes">71 → 73 bytes \(\+2 bytes\)</td>',
        text,
        re.S,
    )
    assert re.search(
        r'<span class="mode mode-create">create</span>.*?<td class="size" title="6 bytes">6 bytes</td>', text, re.S
    )


def test_api_detail_of_a_change(home: Home, workspace: Path, page: Page) -> None:
    p = propose(home, workspace, "notes/a.md", "edit", TEN, TEN + b"x\n")
    found = page.client.get(f"/api/proposals/{p.id}").json()
    assert (found["mode"], found["base_sha256"], found["base_size"]) == ("edit", hashlib.sha256(TEN).hexdigest(), 71)
    assert base64.b64decode(found["base_base64"]) == TEN
    assert base64.b64decode(found["content_base64"]) == TEN + b"x\n"
    listed = page.client.get("/api/proposals").json()["proposals"]
    assert [(r["mode"], r["base_size"]) for r in listed] == [("edit", 71)]


def test_too_many_changes_point_to_the_whole_file(home: Home, workspace: Path, page: Page) -> None:
    base = b"".join(b"%d\n" % i for i in range(6000))
    p = propose(home, workspace, "notes/a.md", "replace", base, base.replace(b"\n", b" changed\n"))
    text = page.client.get(f"/proposals/{p.id}").text
    assert "Too many changes to show (12,000 changed lines)" in text
    assert 'id="diff"' not in text


def _decision_row(home: Home, proposal_id: str) -> dict[str, str]:
    conn = sqlite3.connect(home.db_path)
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM decision WHERE proposal_id = ?", (proposal_id,)).fetchone())
    finally:
        conn.close()
