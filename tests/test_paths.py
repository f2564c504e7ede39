"""The text layer of destination checks, and what check_existing sees on disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gatekeeper.content import invisible
from gatekeeper.content.paths import PathRefused, check_existing, normalise_destination
from gatekeeper.errors import InvalidInput
from tests.hostile_paths import HOSTILE

WS = Path("/srv/workspace")


def test_there_are_many_hostile_cases() -> None:
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize("raw", HOSTILE, ids=repr)
def test_hostile_destination_is_refused_with_a_reason(raw: object) -> None:
    if isinstance(raw, str):
        raw = raw.replace("{ws}", str(WS))
    with pytest.raises(PathRefused) as err:
        normalise_destination(raw, WS)
    assert "refused" in str(err.value) or "must be a string" in str(err.value)
    assert err.value.hint  # always says what to do instead


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("notes/a.md", "notes/a.md"),
        ("a.md", "a.md"),
        ("notes/deep/er/x.txt", "notes/deep/er/x.txt"),
        (f"{WS}/notes/a.md", "notes/a.md"),
        ("notes/caf\u00e9 menu.md", "notes/caf\u00e9 menu.md"),
        ("notes/日本語.md", "notes/日本語.md"),
        ("notes/a.b.c.md", "notes/a.b.c.md"),
        ("notes/console.md", "notes/console.md"),
        ("notes/q3 report final.md", "notes/q3 report final.md"),
        ("notes/\u2764 heart.md", "notes/\u2764 heart.md"),
    ],
)
def test_ordinary_destinations_pass(raw: str, expected: str) -> None:
    assert normalise_destination(raw, WS) == expected


@given(st.text(min_size=1, max_size=60))
def test_anything_accepted_is_a_plain_relative_path(raw: str) -> None:
    try:
        rel = normalise_destination(raw, WS)
    except PathRefused:
        return
    parts = rel.split("/")
    assert not rel.startswith("/") and "\\" not in rel and "\x00" not in rel
    assert all(p not in ("", ".", "..") and not p.startswith(".") for p in parts)
    assert os.path.normpath(rel) == rel
    assert not any(invisible.is_invisible(ch) for ch in rel) and "  " not in rel
    assert all(p == p.strip(" ") for p in parts)


@pytest.mark.parametrize(
    "raw, message, hint",
    [
        (
            "notes/\u2800x.md",
            "destination 'notes/\\u2800x.md' refused: "
            "it contains U+2800 BRAILLE PATTERN BLANK (invisible) at position 7",
            "use visible characters only",
        ),
        ("notes/x\u3164.md", "U+3164 HANGUL FILLER (invisible) at position 8", "use visible characters only"),
        ("notes/x\ufe0f.md", "U+FE0F VARIATION SELECTOR-16 (invisible) at position 8", "use visible characters"),
        ("notes/x\u034f.md", "U+034F COMBINING GRAPHEME JOINER (invisible) at position 8", "use visible characters"),
        ("notes/x\u17b4.md", "U+17B4 KHMER VOWEL INHERENT AQ (invisible) at position 8", "use visible characters"),
        ("a\u202e.md", "U+202E RIGHT-TO-LEFT OVERRIDE (bidirectional control) at position 2", "use visible"),
        ("notes/a\tb.md", "'notes/a\\x09b.md' refused: it contains U+0009 TAB (control character)", "visible"),
        ("notes/a\u2009b.md", "U+2009 THIN SPACE (space other than U+0020) at position 8", "use plain spaces"),
        (
            "notes/q3  report.md",
            "it has 2 spaces in a row at position 9, which a reader takes for one",
            "use single spaces between words",
        ),
        ("notes/q3    report.md", "it has 4 spaces in a row at position 9", "use single spaces"),
        ("notes/ a.md", "the name ' a.md' starts with a space", "remove the space at the start or end"),
        ("notes /a.md", "the name 'notes ' ends with a space", "remove the space at the start or end"),
        ("notes/a.md.", "the name 'a.md.' ends with a dot", "remove the trailing dot"),
    ],
)
def test_refusals_say_what_and_where(raw: str, message: str, hint: str) -> None:
    with pytest.raises(PathRefused) as err:
        normalise_destination(raw, WS)
    assert message in err.value.message
    assert err.value.hint is not None and hint in err.value.hint
    assert not any(invisible.is_invisible(ch) for ch in err.value.message)  # the message shows escapes, not the char


def test_existing_file_symlinks_and_files_as_folders(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "a.md").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "evil").symlink_to(outside)
    (ws / "notes" / "link.md").symlink_to(ws / "notes" / "a.md")
    (ws / "notes" / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    check_existing(ws, "notes/new.md")
    check_existing(ws, "brand/new/folder/x.md")
    cases = {
        "notes/a.md": "already exists",
        "evil/x.md": "is a symbolic link",
        "notes/link.md": "the destination is a symbolic link",
        "notes/dangling.md": "the destination is a symbolic link",
        "notes/a.md/x.md": "is a file, not a folder",
    }
    for rel, message in cases.items():
        with pytest.raises(PathRefused, match=message):
            check_existing(ws, rel)
    assert list(outside.iterdir()) == []
    with pytest.raises(InvalidInput, match="does not exist"):
        check_existing(tmp_path / "missing", "a.md")
