"""What a change does to a file, as a person reads it: a unified diff from base to result.

Pure functions over bytes, shared by the proxy (an edit's dry run answers with the diff) and the
review page (which renders the same hunks with line numbers and invisible-character marks).

Lines are split on ``\\n`` only: ``str.splitlines`` would also break at U+2028, U+0085, form feed
and a lone ``\\r``, so a change hidden in one of those would show as something else. A ``\\r``
before the ``\\n`` stays part of the line (the page marks it), and a last line without ``\\n``
is a different line from the same text with one.

Cost: common leading and trailing lines are cut off first (an edit usually touches a small middle
of a large file), then ``difflib.SequenceMatcher`` runs on what is left. A middle that is too big
to diff quickly, or a diff with too many lines to show, gives ``Diff.too_many`` instead of hunks.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

CONTEXT = 3
MAX_MIDDLE_LINES = 40_000  # lines left on either side after trimming; above: not diffed
MAX_SHOWN_LINES = 5_000  # rows of hunks a page shows; above: "too many changes to show"


@dataclass(frozen=True)
class Line:
    """One row of a hunk. ``kind``: context, added or removed; ``old``/``new``: 1-based numbers
    on each side (None on the side the line is not in); ``text`` without its ``\\n``."""

    kind: str
    old: int | None
    new: int | None
    text: str
    no_newline: bool = False  # the last line of its file, with no newline after it


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: list[Line]

    @property
    def header(self) -> str:
        return f"@@ -{_range(self.old_start, self.old_count)} +{_range(self.new_start, self.new_count)} @@"


@dataclass
class Diff:
    """``kind``: text, binary, or same (identical bytes). ``too_many``: counted, not shown."""

    kind: str
    old_size: int
    new_size: int
    hunks: list[Hunk] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    too_many: bool = False
    too_many_why: str = ""


def as_text(data: bytes) -> str | None:
    """The bytes as text, or None when they are not UTF-8 (or hold NUL): such a file is binary."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def lines_of(text: str) -> list[str]:
    """``text`` cut after each ``\\n`` (kept); the last piece has none if the text does not end with one."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def diff(base: bytes, result: bytes, context: int = CONTEXT) -> Diff:
    """The structured diff from base to result (see the module docstring for limits)."""
    old_text, new_text = as_text(base), as_text(result)
    if old_text is None or new_text is None:
        return Diff("binary", len(base), len(result))
    if base == result:
        return Diff("same", len(base), len(result))
    out = Diff("text", len(base), len(result))
    a, b = lines_of(old_text), lines_of(new_text)
    head = _common_prefix(a, b)
    tail = _common_suffix(a, b, head)
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if len(mid_a) > MAX_MIDDLE_LINES or len(mid_b) > MAX_MIDDLE_LINES:
        out.removed, out.added = len(mid_a), len(mid_b)  # at most: a line-by-line match was not tried
        out.too_many, out.too_many_why = True, f"{len(mid_a):,} lines differ from {len(mid_b):,}"
        return out
    # autojunk off: with it, lines frequent in the file (blank ones, "}") are never matched and a
    # small edit shows as a big rewrite; trimming keeps the middle small enough for it to be cheap.
    matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
    ops = [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]
    for tag, i1, i2, j1, j2 in ops:
        if tag in ("replace", "delete"):
            out.removed += i2 - i1
        if tag in ("replace", "insert"):
            out.added += j2 - j1
    if out.added + out.removed > MAX_SHOWN_LINES:
        out.too_many, out.too_many_why = True, f"{out.added + out.removed:,} changed lines"
        return out
    out.hunks = _hunks(a, b, ops, context)
    return out


def _common_prefix(a: list[str], b: list[str]) -> int:
    n, limit = 0, min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def _common_suffix(a: list[str], b: list[str], head: int) -> int:
    n, limit = 0, min(len(a), len(b)) - head
    while n < limit and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _hunks(a: list[str], b: list[str], ops: list[tuple[str, int, int, int, int]], context: int) -> list[Hunk]:
    """Group the changed opcodes with ``context`` lines around them, like ``diff -u``."""
    changes = [op for op in ops if op[0] != "equal"]
    groups: list[list[tuple[str, int, int, int, int]]] = []
    for op in changes:
        if groups and op[1] - groups[-1][-1][2] <= 2 * context:
            groups[-1].append(op)
        else:
            groups.append([op])
    hunks = []
    for group in groups:
        o1 = max(0, group[0][1] - context)
        n1 = group[0][3] - (group[0][1] - o1)
        o2 = min(len(a), group[-1][2] + context)
        n2 = group[-1][4] + (o2 - group[-1][2])
        rows: list[Line] = []
        i, j = o1, n1
        for _tag, i1, i2, j1, j2 in group:
            while i < i1:  # context before this change
                rows.append(_line("context", a, i, j))
                i, j = i + 1, j + 1
            rows += [_line("removed", a, k, None) for k in range(i1, i2)]
            rows += [_line("added", b, None, k) for k in range(j1, j2)]
            i, j = i2, j2
        while i < o2:
            rows.append(_line("context", a, i, j))
            i, j = i + 1, j + 1
        hunks.append(Hunk(o1 + 1, o2 - o1, n1 + 1, n2 - n1, rows))
    return hunks


def _line(kind: str, source: list[str], old: int | None, new: int | None) -> Line:
    raw = source[old if kind != "added" else new]  # type: ignore[index]
    ends = raw.endswith("\n")
    return Line(
        kind,
        None if old is None else old + 1,
        None if new is None else new + 1,
        raw[:-1] if ends else raw,
        not ends,
    )


def _range(start: int, count: int) -> str:
    # diff -u: an empty side is numbered from the line before it
    return f"{start - 1 if count == 0 else start},{count}" if count != 1 else str(start)


def unified(base: bytes, result: bytes, path: str, context: int = CONTEXT) -> str:
    """A ``diff -u`` of ``path`` from base to result; binary files get one line that says so."""
    found = diff(base, result, context)
    if found.kind == "binary":
        return f"Binary file {path}: {len(base):,} bytes → {len(result):,} bytes\n"
    if found.kind == "same":
        return ""
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    if found.too_many:
        out.append(f"(too many changes to show: {found.too_many_why}; +{found.added} −{found.removed})\n")
        return "".join(out)
    sign = {"context": " ", "added": "+", "removed": "-"}
    for hunk in found.hunks:
        out.append(hunk.header + "\n")
        for line in hunk.lines:
            out.append(f"{sign[line.kind]}{line.text}\n")
            if line.no_newline:
                out.append("\\ No newline at end of file\n")
    return "".join(out)
