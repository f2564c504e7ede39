"""What a change does to a file, as a person reads it: a unified diff from base to result.

Pure functions over bytes, shared by the proxy (an edit's dry run answers with the diff) and the
review page (which renders the same hunks with line numbers and invisible-character marks).

Lines are split on ``\\n`` only: ``str.splitlines`` would also break at U+2028, U+0085, form feed
and a lone ``\\r``, so a change hidden in one of those would show as something else. A ``\\r``
before the ``\\n`` stays part of the line (the page marks it), and a last line without ``\\n``
is a different line from the same text with one.

Cost: common leading and trailing lines are cut off first (an edit usually touches a small middle
of a large file), then lines unique on both sides anchor the match (patience diff) and
``difflib.SequenceMatcher`` runs only on the stretches between anchors. A middle that is too big
to diff quickly, or a diff with too many lines to show, gives ``Diff.too_many`` instead of hunks.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
from collections import Counter
from dataclasses import dataclass, field

CONTEXT = 3
MAX_MIDDLE_LINES = 40_000  # lines left on either side after trimming; above: not diffed
MAX_GAP_WORK = 4_000_000  # lines × lines between two anchors that SequenceMatcher may take on
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
    ops = [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in _opcodes(mid_a, mid_b)]
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


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib-style opcodes, anchored first on lines that occur once on each side (patience diff).

    SequenceMatcher alone rescans the whole range for every change: 500 edits spread through a
    1 MiB file took a second. Unique lines in the same order are certainly unchanged; only the short
    stretches between them go to SequenceMatcher (autojunk off: with it, lines frequent in the file,
    blank ones or "}", are never matched and a small edit shows as a big rewrite)."""
    blocks: list[tuple[int, int, int]] = []  # (i, j, size) matching runs, in order
    run_i = run_j = run_n = 0  # the run of adjacent anchors being extended
    i0 = j0 = 0
    for i, j in [*_anchors(a, b), (len(a), len(b))]:
        if i != i0 or j != j0:  # a stretch between anchors
            if run_n:
                blocks.append((run_i, run_j, run_n))
                run_n = 0
            gap_a, gap_b = a[i0:i], b[j0:j]
            # A long stretch with no line unique on both sides (over MAX_GAP_WORK) is shown as replaced.
            if gap_a and gap_b and len(gap_a) * len(gap_b) <= MAX_GAP_WORK:
                matcher = difflib.SequenceMatcher(None, gap_a, gap_b, autojunk=False)
                blocks += [(i0 + x, j0 + y, n) for x, y, n in matcher.get_matching_blocks() if n]
        if i < len(a):
            if run_n:
                run_n += 1
            else:
                run_i, run_j, run_n = i, j, 1
        i0, j0 = i + 1, j + 1
    if run_n:
        blocks.append((run_i, run_j, run_n))
    ops: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    for bi, bj, n in [*blocks, (len(a), len(b), 0)]:
        if i < bi and j < bj:
            ops.append(("replace", i, bi, j, bj))
        elif i < bi:
            ops.append(("delete", i, bi, j, j))
        elif j < bj:
            ops.append(("insert", i, i, j, bj))
        if n:
            if ops and ops[-1][0] == "equal" and ops[-1][2] == bi:
                ops[-1] = ("equal", ops[-1][1], bi + n, ops[-1][3], bj + n)
            else:
                ops.append(("equal", bi, bi + n, bj, bj + n))
        i, j = bi + n, bj + n
    return ops


def _anchors(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """Pairs (i, j) of lines unique in a and in b, equal, in increasing order on both sides
    (the longest increasing run of j over i, by patience sorting)."""
    count_a = Counter(a)
    once_b = {line: j for j, line in enumerate(b)}
    count_b = Counter(b)
    pairs = [(i, once_b[x]) for i, x in enumerate(a) if count_a[x] == 1 and count_b.get(x) == 1]
    if all(p[1] < q[1] for p, q in itertools.pairwise(pairs)):
        return pairs  # nothing moved (the usual case): already increasing on both sides
    tails: list[int] = []  # tails[k]: the smallest j ending an increasing run of length k + 1
    tail_at: list[int] = []  # index into pairs of that tail
    back: list[int] = []  # previous pair in the run ending at each pair
    for k, (_i, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        back.append(tail_at[pos - 1] if pos else -1)
        if pos == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[pos], tail_at[pos] = j, k
    out: list[tuple[int, int]] = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        out.append(pairs[k])
        k = back[k]
    return out[::-1]


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
