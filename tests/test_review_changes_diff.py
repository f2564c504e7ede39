"""gatekeeper.content.diff: the hunks the review page draws and the text an edit's dry run answers with.

The property test rebuilds the result from the base and the hunks alone: every context and removed
line must be the base's line at its number, every added line the result's line at its number."""

from __future__ import annotations

import random

import pytest

from gatekeeper.content import diff


def rebuild(base: bytes, found: diff.Diff) -> bytes:
    a = diff.lines_of(base.decode())
    out: list[str] = []
    i = 0
    for hunk in found.hunks:
        start = hunk.old_start - 1
        out += a[i:start]
        i = start
        for line in hunk.lines:
            text = line.text + ("" if line.no_newline else "\n")
            if line.kind == "added":
                out.append(text)
                assert line.new == len(out) and line.old is None
                continue
            assert a[i] == text and line.old == i + 1
            i += 1
            if line.kind == "context":
                out.append(text)
                assert line.new == len(out)
    return "".join(out + a[i:]).encode()


@pytest.mark.parametrize("seed", range(5))
def test_hunks_rebuild_the_result(seed: int) -> None:
    rng = random.Random(seed)
    words = ["a", "b", "c", "d\r", "", "x\u2028y", "z\u200b"]
    for _ in range(400):
        old = [rng.choice(words) for _ in range(rng.randint(0, 30))]
        new = list(old)
        for _ in range(rng.randint(0, 5)):
            new.insert(rng.randint(0, len(new)), rng.choice(words))
            if new and rng.random() < 0.5:
                new.pop(rng.randrange(len(new)))
        base = ("\n".join(old) + rng.choice(["", "\n"])).encode()
        result = ("\n".join(new) + rng.choice(["", "\n"])).encode()
        found = diff.diff(base, result)
        if base == result:
            assert found.kind == "same"
            continue
        assert rebuild(base, found) == result
        assert found.added == sum(1 for h in found.hunks for x in h.lines if x.kind == "added")
        assert found.removed == sum(1 for h in found.hunks for x in h.lines if x.kind == "removed")


def test_lines_split_on_newline_only() -> None:
    """U+2028, U+0085, form feed and a lone CR do not end a line: splitlines() would hide them."""
    found = diff.diff("a\u2028b\n".encode(), "a\u2029b\x0cc\rd\x85e\n".encode())
    assert [(x.kind, x.text) for h in found.hunks for x in h.lines] == [
        ("removed", "a\u2028b"),
        ("added", "a\u2029b\x0cc\rd\x85e"),
    ]


def test_unified_marks_missing_final_newline_and_crlf() -> None:
    out = diff.unified(b"a\r\nb", b"a\nb\n", "n.md")
    assert out == ("--- a/n.md\n+++ b/n.md\n@@ -1,2 +1,2 @@\n-a\r\n-b\n\\ No newline at end of file\n+a\n+b\n")


def test_binary_and_same() -> None:
    assert diff.diff(b"\0\1", b"x").kind == "binary"
    assert diff.diff(b"\xff", b"x").kind == "binary"  # not UTF-8
    assert diff.unified(b"\0" * 10, b"\0" * 3, "a.bin") == "Binary file a.bin: 10 bytes → 3 bytes\n"
    assert diff.diff(b"x\n", b"x\n").kind == "same" and diff.unified(b"x\n", b"x\n", "a") == ""


def test_insert_into_empty_file_is_numbered_like_diff_u() -> None:
    assert diff.unified(b"", b"hi\n", "a") == "--- a/a\n+++ b/a\n@@ -0,0 +1 @@\n+hi\n"


def test_too_many_changes_are_counted_not_shown() -> None:
    base = b"".join(b"%d\n" % i for i in range(diff.MAX_SHOWN_LINES))
    found = diff.diff(base, base.replace(b"\n", b"!\n"))
    assert found.too_many and not found.hunks
    assert (found.added, found.removed) == (diff.MAX_SHOWN_LINES, diff.MAX_SHOWN_LINES)
    huge = b"x\n" * (diff.MAX_MIDDLE_LINES + 1)
    found = diff.diff(b"start\n" + huge, b"other\n" + huge.replace(b"x", b"y"))
    assert found.too_many and "lines differ" in found.too_many_why


def test_common_ends_are_trimmed_before_matching() -> None:
    """A small edit in the middle of a large file diffs only the middle: one hunk, exact numbers."""
    base = b"".join(b"line %d\n" % i for i in range(100_000))
    found = diff.diff(base, base.replace(b"line 50000\n", b"line fifty thousand\n"))
    assert [(h.old_start, h.old_count, h.new_start, h.new_count) for h in found.hunks] == [(49998, 7, 49998, 7)]
    assert (found.added, found.removed) == (1, 1)


@pytest.mark.parametrize("seed", range(3))
def test_moved_lines_rebuild_the_result(seed: int) -> None:
    """Unique lines out of order (a moved block): the anchors keep the longest run in order."""
    rng = random.Random(seed)
    for _ in range(200):
        old = [f"l{i}" for i in range(rng.randint(1, 40))] + ["", "}"] * rng.randint(0, 3)
        new = list(old)
        a, b = sorted(rng.sample(range(len(new) + 1), 2))
        block = new[a:b]
        del new[a:b]
        at = rng.randint(0, len(new))
        new[at:at] = block
        if rng.random() < 0.5:
            new.insert(rng.randint(0, len(new)), "added")
        base, result = "\n".join(old).encode(), "\n".join(new).encode()
        found = diff.diff(base, result)
        if base != result:
            assert rebuild(base, found) == result
