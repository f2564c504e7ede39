"""gatekeeper.content.changes: the exact result bytes of each mode, and a precise refusal for every bad edit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gatekeeper.content.changes import Change, apply, dry_run_requested, edited
from gatekeeper.errors import InvalidInput
from gatekeeper.policy import Propose

PATH = "notes/a.md"


def rule(mode: str, **extra: Any) -> Propose:
    keys: dict[str, Any] = {"mode": mode, "path": {"arg": "path"}, **extra}
    if mode in ("create", "replace", "append"):
        keys["content"] = {"arg": "content"}
    return Propose.model_validate(keys)


def edit(base: bytes, *pairs: tuple[Any, Any], **args: Any) -> bytes:
    edits = [{"oldText": old, "newText": new} for old, new in pairs]
    return apply(rule("edit"), PATH, {"edits": edits, **args}, base, None).result


def refusal(call: Any) -> str:
    with pytest.raises(InvalidInput) as info:
        call()
    return str(info.value)


def test_create_needs_a_missing_destination() -> None:
    assert apply(rule("create"), PATH, {}, None, b"new") == Change("create", b"new")
    assert "already exists" in refusal(lambda: apply(rule("create"), PATH, {}, b"x", b"new"))


def test_replace_is_the_whole_new_content() -> None:
    assert apply(rule("replace"), PATH, {}, b"old\n", b"new\n") == Change("replace", b"new\n")


def test_replace_of_a_missing_file_is_refused_unless_create_if_missing() -> None:
    message = refusal(lambda: apply(rule("replace"), PATH, {}, None, b"new"))
    assert message.startswith(f"{PATH} does not exist") and "creates new files" in message
    created = apply(rule("replace", create_if_missing=True), PATH, {}, None, b"new")
    assert created == Change("create", b"new")


@pytest.mark.parametrize(
    ("base", "separator", "expected"),
    [
        (b"# Log\nfirst", None, b"# Log\nfirstsecond\n"),
        (b"# Log\nfirst", "\n", b"# Log\nfirst\nsecond\n"),
        (b"# Log\nfirst\n", "\n", b"# Log\nfirst\nsecond\n"),  # already ends with it
        (b"", "\n", b"second\n"),  # empty file: no separator
        (b"a\n\n", "\n\n", b"a\n\nsecond\n"),
        (b"a\n", "\n\n", b"a\n\n\nsecond\n"),  # ends with part of it only
        (b"\xff\xfe", "\n", b"\xff\xfe\nsecond\n"),  # bytes, whatever the base
    ],
)
def test_append_and_its_separator(base: bytes, separator: str | None, expected: bytes) -> None:
    change = apply(rule("append", separator=separator), PATH, {}, base, b"second\n")
    assert change == Change("append", expected)


def test_append_to_a_missing_file() -> None:
    assert "does not exist" in refusal(lambda: apply(rule("append"), PATH, {}, None, b"x"))
    created = apply(rule("append", separator="\n", create_if_missing=True), PATH, {}, None, b"x")
    assert created == Change("create", b"x")


def test_delete_needs_the_file_and_has_no_result() -> None:
    assert apply(rule("delete"), PATH, {}, b"bye", None) == Change("delete", b"")
    assert "does not exist" in refusal(lambda: apply(rule("delete"), PATH, {}, None, None))


def test_a_change_that_changes_nothing_is_refused() -> None:
    message = refusal(lambda: apply(rule("replace"), PATH, {}, b"same", b"same"))
    assert "leaves notes/a.md exactly as it is" in message
    assert "exactly as it is" in refusal(lambda: edit(b"a b", ("a", "a")))


def test_edits_apply_in_order_each_to_the_previous_result() -> None:
    base = b"alpha\nbeta\ngamma\n"
    assert edit(base, ("beta", "BETA\nbeta2")) == b"alpha\nBETA\nbeta2\ngamma\n"
    # the second edit sees the first one's text: "beta2" exists only after edit 1
    assert edit(base, ("beta", "BETA\nbeta2"), ("beta2", "b2")) == b"alpha\nBETA\nb2\ngamma\n"
    # CRLF is kept exactly; nothing is normalised
    assert edit(b"one\r\ntwo\r\n", ("two", "2")) == b"one\r\n2\r\n"
    # a BOM stays
    assert edit("\ufeffhé\n".encode(), ("é", "o")) == "\ufeffho\n".encode()
    # new text may be empty (delete a line)
    assert edit(b"a\nb\nc\n", ("b\n", "")) == b"a\nc\n"


def test_edit_not_found_names_the_edit() -> None:
    message = refusal(lambda: edit(b"alpha\nbeta\n", ("alpha", "A"), ("nope", "x"), ("beta", "B")))
    assert message.startswith("edit 2 of 3: oldText not found in notes/a.md")
    assert "copy the exact current text" in message


def test_an_edit_that_matches_only_before_the_previous_edit_is_not_found() -> None:
    message = refusal(lambda: edit(b"alpha\n", ("alpha", "A"), ("alpha", "B")))
    assert message.startswith("edit 2 of 2: oldText not found")


def test_edit_found_several_times() -> None:
    message = refusal(lambda: edit(b"x\ny\nx\nx\n", ("x", "z")))
    assert message == "edit 1 of 1: oldText found 3 times in notes/a.md (add surrounding lines so it matches once)"
    # overlapping occurrences count
    assert "found 2 times" in refusal(lambda: edit(b"aaa", ("aa", "b")))
    assert "100 times or more" in refusal(lambda: edit(b"a" * 500, ("a", "b")))


def test_empty_old_text_is_refused() -> None:
    message = refusal(lambda: edit(b"abc", ("a", "A"), ("", "x")))
    assert message.startswith("edit 2 of 2: oldText is empty")


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        (None, "'edits' must be a non-empty list of edits, got missing"),
        ([], "'edits' must be a non-empty list of edits, got an empty list"),
        ("old→new", "'edits' must be a non-empty list of edits, got a str"),
        ([{"oldText": "a", "newText": "b"}, "x"], "edit 2 of 2 must be an object, got str"),
        ([{"newText": "b"}], "edit 1 of 1: 'oldText' is missing"),
        ([{"oldText": "a"}], "edit 1 of 1: 'newText' is missing"),
        ([{"oldText": "a", "newText": 3}], "edit 1 of 1: 'newText' must be a string, got int"),
        ([{"oldText": None, "newText": "b"}], "edit 1 of 1: 'oldText' must be a string, got NoneType"),
        ([{"oldText": "a\ud800", "newText": "b"}], "edit 1 of 1: 'oldText' contains unpaired surrogate"),
    ],
)
def test_malformed_edit_lists_are_refused_by_index_and_key(edits: Any, expected: str) -> None:
    args = {} if edits is None else {"edits": edits}
    assert refusal(lambda: apply(rule("edit"), PATH, args, b"abc", None)).startswith(expected)


def test_custom_edit_keys() -> None:
    custom = rule("edit", edits={"arg": "changes", "old": "find", "new": "put", "dry_run": None})
    args = {"changes": [{"find": "b", "put": "B"}], "dryRun": True}
    assert apply(custom, PATH, args, b"abc", None).result == b"aBc"
    assert not dry_run_requested(custom, args)


def test_edit_needs_utf8_text() -> None:
    message = refusal(lambda: edit(b"ok\n\xff\xfe", ("ok", "OK")))
    assert message.startswith("notes/a.md is not UTF-8 text (byte 3 of 5)")
    assert "does not exist" in refusal(lambda: apply(rule("edit"), PATH, {"edits": []}, None, None))


def test_old_text_spanning_an_invisible_character_in_the_file() -> None:
    base = "total: 10\u200b0 EUR\n".encode()
    message = refusal(lambda: edit(base, ("100 EUR", "200 EUR")))
    assert message.startswith("edit 1 of 1: oldText not found in notes/a.md")
    assert "would match if invisible characters were ignored" in message
    assert "the file has U+200B ZERO WIDTH SPACE inside that text" in message
    # matching stays exact: the same characters match
    assert edit(base, ("10\u200b0 EUR", "200 EUR")) == b"total: 200 EUR\n"


def test_old_text_carrying_an_invisible_character_the_file_lacks() -> None:
    message = refusal(lambda: edit(b"hello world\n", ("hello\u2060 world", "hi")))
    assert "oldText has U+2060 WORD JOINER" in message


def test_layout_characters_are_never_ignored_when_re_matching() -> None:
    message = refusal(lambda: edit(b"a\nb\n", ("ab", "x")))
    assert "invisible" not in message


def test_dry_run_argument() -> None:
    assert dry_run_requested(rule("edit"), {"dryRun": True})
    assert not dry_run_requested(rule("edit"), {"dryRun": False})
    assert not dry_run_requested(rule("edit"), {})
    assert not dry_run_requested(rule("replace"), {"dryRun": True})
    assert "dryRun must be true or false" in refusal(lambda: dry_run_requested(rule("edit"), {"dryRun": "yes"}))


@given(st.text(min_size=1), st.text(), st.text(), st.text())
def test_a_unique_edit_replaces_exactly_that_text(old: str, new: str, before: str, after: str) -> None:
    text = before + old + after
    if text.find(old, text.find(old) + 1) >= 0 or any(0xD800 <= ord(c) < 0xE000 for c in text + new):
        return
    shape = rule("edit")
    result = edited(text.encode(), {"edits": [{"oldText": old, "newText": new}]}, shape, PATH)
    assert result == (before + new + after).encode()
