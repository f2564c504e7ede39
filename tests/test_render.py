"""What the reviewer sees is what will be written: marks, counts, hex dumps, limits."""

from __future__ import annotations

import base64
import json

from gatekeeper.review.render import FOLD_ROWS, Mark, Note, arguments, fold_at, marks, render


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


def test_an_argument_that_is_the_content_says_so_instead_of_repeating_it() -> None:
    body = "line one\nline \u202etwo\n"
    sent = json.dumps({"body": body, "nested": {"body": body}, "title": "t\u200bitle"})
    r = arguments(sent, body.encode(), "text", "the content shown above")
    assert r.lines[1] == ['  "body": ', Note("the content shown above"), ","]
    # Only the repeat is named: the other arguments keep their hidden characters marked, nested copies too.
    assert r.hidden == {"U+200B ZERO WIDTH SPACE": 1, "U+202E RIGHT-TO-LEFT OVERRIDE": 1}
    assert r.lines[-2] == ['  "title": "t', Mark("U+200B", "ZERO WIDTH SPACE", False), 'itle"']
    last = arguments(json.dumps({"path": "a.md", "content": body}), body.encode(), "text", "same")
    assert last.lines[-2] == ['  "content": ', Note("same")]


def test_a_base64_argument_is_the_content_only_when_it_decodes_to_it() -> None:
    data = bytes(range(256))
    sent = json.dumps({"content": base64.b64encode(data).decode(), "other": base64.b64encode(b"x").decode()})
    r = arguments(sent, data, "base64", "same")
    assert r.lines[1] == ['  "content": ', Note("same"), ","]
    assert isinstance(r.lines[2][0], str) and r.lines[2][0].startswith('  "other": "eA==')
    assert arguments(sent, data, "text", "same").lines[1][0].startswith('  "content": "AAECAw')  # a text rule


def test_nothing_is_named_for_an_empty_content_or_arguments_that_are_not_an_object() -> None:
    assert arguments(json.dumps({"content": ""}), b"", "text", "same").lines[1] == ['  "content": ""']
    assert arguments(json.dumps(["a"]), b"a", "text", "same").lines[1] == ['  "a"']


def test_long_contents_fold_after_a_few_hundred_lines_or_many_characters() -> None:
    assert fold_at([10] * 100) == 100  # short: nothing folded
    assert fold_at([10] * (FOLD_ROWS + 20)) == FOLD_ROWS + 20  # a few rows more are shown, not folded
    assert fold_at([10] * 2000) == FOLD_ROWS
    assert fold_at([1000] * 200) == 16  # long lines: folded by characters
    assert fold_at([200_000]) == 1  # one huge line is still shown
    big = render(b"".join(b"line %d \xe2\x80\x8b\n" % i for i in range(1000)))
    assert big.fold == FOLD_ROWS and big.count == 1000
    assert big.folded_hidden == 1000 - FOLD_ROWS  # the fold's summary names the marks it hides
