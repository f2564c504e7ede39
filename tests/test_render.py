"""What the reviewer sees is what will be written: marks, counts, hex dumps, limits."""

from __future__ import annotations

from gatekeeper.review.render import Mark, marks, render


def test_plain_text_lines() -> None:
    r = render(b"a\nb\n")
    assert r.kind == "text" and r.lines == [["a"], ["b"]] and r.final_newline and r.hidden_total == 0


def test_invisible_bidi_and_control_characters_are_marked_and_counted() -> None:
    r = render("x\u202ey\u200bz\r\n\x1b[31m\ufeff\u00a0".encode())
    assert r.lines[0] == [
        "x",
        Mark("U+202E", "RIGHT-TO-LEFT OVERRIDE", True),
        "y",
        Mark("U+200B", "ZERO WIDTH SPACE", False),
        "z",
        Mark("U+000D", "CARRIAGE RETURN", False),
    ]
    assert r.hidden_total == 6 and r.bidi_count == 1
    assert r.hidden["U+001B ESCAPE"] == 1 and r.hidden["U+00A0 NO-BREAK SPACE"] == 1
    assert not r.final_newline


def test_tabs_and_ordinary_unicode_are_not_marked() -> None:
    r = render("\tcaf\u00e9 \u65e5\u672c \U0001f600\n".encode())
    assert r.hidden_total == 0 and r.lines == [["\tcaf\u00e9 \u65e5\u672c \U0001f600"]]


def test_non_utf8_is_a_hex_dump() -> None:
    r = render(b"\x00\xffabc" + bytes(range(20)))
    assert r.kind == "hex"
    assert r.hex_rows[0][0] == "00000000" and r.hex_rows[0][1].startswith("00 ff 61 62 63")
    assert r.hex_rows[0][2].startswith("..abc")


def test_over_the_limit_says_so_and_cuts_at_a_character() -> None:
    r = render(("\u00e9" * 10).encode(), limit=5)
    assert r.truncated and r.total_bytes == 20 and r.lines == [["\u00e9\u00e9"]]


def test_empty() -> None:
    assert render(b"").kind == "empty"


ISSUE_9_INVISIBLES = ["\u034f", "\u115f", "\u1160", "\u17b4", "\u180b", "\u2800", "\u3164", "\ufe0f", "\U000e0100"]


def test_default_ignorable_fillers_blanks_and_variation_selectors_are_marked_and_counted() -> None:
    text = "".join(f"x{ch}" for ch in ISSUE_9_INVISIBLES) + "\n"
    r = render(text.encode())
    marks = [seg for seg in r.lines[0] if isinstance(seg, Mark)]
    assert [m.code for m in marks] == [f"U+{ord(ch):04X}" for ch in ISSUE_9_INVISIBLES]
    assert r.lines[0][0] == "x" and r.lines[0][2] == "x"
    assert r.hidden_total == len(ISSUE_9_INVISIBLES) and r.bidi_count == 0
    assert r.hidden["U+2800 BRAILLE PATTERN BLANK"] == 1 and r.hidden["U+3164 HANGUL FILLER"] == 1
    assert r.hidden["U+FE0F VARIATION SELECTOR-16"] == 1 and r.hidden["U+E0100 VARIATION SELECTOR-17"] == 1


def test_runs_of_spaces_are_kept_exactly() -> None:
    r = render(b"q3  report   final \n  indented\n")
    assert r.lines == [["q3  report   final "], ["  indented"]] and r.hidden_total == 0


def test_marks_for_a_path_keep_spaces_and_mark_tabs_and_invisibles() -> None:
    assert marks("notes/q3  report.md") == ["notes/q3  report.md"]
    assert marks("notes/\u2800x\t.md") == [
        "notes/",
        Mark("U+2800", "BRAILLE PATTERN BLANK", False),
        "x",
        Mark("U+0009", "TAB", False),
        ".md",
    ]
    assert marks("a\u202eb") == ["a", Mark("U+202E", "RIGHT-TO-LEFT OVERRIDE", True), "b"]
