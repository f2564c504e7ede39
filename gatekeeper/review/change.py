"""A change to an existing file as the page shows it: the diff with every line's hidden characters
marked and counted per side, the bytes a delete removes, a binary file's hex, and whether the file
on disk still is the base the proposal was made against.

Plain data for the template (which escapes every piece). The disk is read only here, once per page
view, read beneath the workspace (``workspace.reading.read_at``: no symlinks followed).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from gatekeeper import humane
from gatekeeper.content import diff
from gatekeeper.review import render
from gatekeeper.workspace.reading import read_at

HEX_BYTES = 4096  # a binary change shows this much of each side as hex


@dataclass(frozen=True)
class Row:
    kind: str  # context, added, removed
    old: int | None
    new: int | None
    segments: list[render.Segment]
    no_newline: bool


@dataclass(frozen=True)
class HunkView:
    header: str
    rows: list[Row]


@dataclass
class ChangeView:
    mode: str
    kind: str  # text, binary, same, delete
    old_size: int
    new_size: int
    added: int = 0
    removed: int = 0
    too_many: bool = False
    too_many_why: str = ""
    hunks: list[HunkView] = field(default_factory=list)
    hidden_removed: Counter[str] = field(default_factory=Counter)
    hidden_added: Counter[str] = field(default_factory=Counter)
    hidden_context: Counter[str] = field(default_factory=Counter)
    old_hex: render.Rendering | None = None
    new_hex: render.Rendering | None = None
    deleted: render.Rendering | None = None  # delete: the bytes that will go

    @property
    def hidden_total(self) -> int:
        return sum(self.hidden_removed.values()) + sum(self.hidden_added.values()) + sum(self.hidden_context.values())

    @property
    def size_change(self) -> str:
        return size_change(self.old_size, self.new_size)

    def table_rows(self, start: int = 0, stop: int | None = None) -> Markup:
        """The diff table's rows ``start:stop`` as HTML (hunk headers count as rows)."""
        return Markup("".join(self._rows[start:stop]))  # every text piece in them is escaped

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @cached_property
    def fold(self) -> int:
        """How many diff rows the page shows before "show all" (``row_count``: all of them)."""
        sizes: list[int] = []
        for hunk in self.hunks:
            sizes.append(len(hunk.header))
            sizes.extend(sum(len(seg) if isinstance(seg, str) else 12 for seg in r.segments) for r in hunk.rows)
        return render.fold_at(sizes)

    @property
    def folded_hidden(self) -> int:
        """Invisible characters in the folded rows, which the fold's summary names."""
        marks = [
            n
            for hunk in self.hunks
            for n in (0, *(sum(isinstance(seg, render.Mark) for seg in r.segments) for r in hunk.rows))
        ]
        return sum(marks[self.fold :])

    @cached_property
    def _rows(self) -> list[str]:
        """The rows as HTML, built here, not in the template: a 1,000-line diff in a large file is
        thousands of rows, and a Jinja loop over them cost ~80 ms of a page whose whole budget is
        100 ms. Every piece of text goes through ``markupsafe.escape``; marks are the same ``<mark>``
        that ``_text.html`` draws."""
        out: list[str] = []
        for hunk in self.hunks:
            out.append(
                '<tr class="hunk"><td class="ln"></td><td class="ln"></td>'
                f'<td class="code" colspan="2">{escape(hunk.header)}</td></tr>\n'
            )
            for r in hunk.rows:
                code = "".join(escape(seg) if isinstance(seg, str) else _mark_html(seg) for seg in r.segments)
                if r.no_newline:
                    code += '<span class="nonl">no newline at end of file</span>'
                out.append(
                    f'<tr class="{r.kind}"><td class="ln old">{r.old or ""}</td><td class="ln new">{r.new or ""}</td>'
                    f'<td class="sign">{_SIGN[r.kind]}</td><td class="code">{code}</td></tr>\n'
                )
        return out


_SIGN = {"added": "+", "removed": "−", "context": ""}


def _mark_html(mark: render.Mark) -> str:
    cls = "hidden bidi" if mark.bidi else "hidden"
    what = escape(f"{mark.code} {mark.name}")
    return f'<mark class="{cls}" title="{what}">⟨{what}⟩</mark>'


@dataclass(frozen=True)
class OnDisk:
    """``state``: same (the base is still there, or for a create nothing is), changed, unknown."""

    state: str
    detail: str = ""


def size_change(old: int | None, new: int) -> str:
    """ "1.2 KB → 1.3 KB (+106 bytes)", "71 → 83 bytes (+12 bytes)", "2,910 → 2,918 bytes (+8 bytes)" (where
    both round alike); a create is just its size."""
    if old is None:
        return humane.size(new)
    before, after = humane.size(old), humane.size(new)
    if before == after and old != new:  # "2.9 KB → 2.9 KB" says nothing: the exact counts do
        before, after = f"{old:,}", f"{new:,} bytes"
    elif before.endswith(" bytes") and after.endswith(" bytes"):
        before = before.removesuffix(" bytes")
    return f"{before} → {after} ({humane.size_delta(new - old)})"


def queue_size(size: int, base_size: int | None, mode: str) -> str:
    """The queue's size column: a create's size, a change's size before → after."""
    return size_change(None if mode == "create" else base_size or 0, size)


def view(p: dict[str, Any]) -> ChangeView:
    """The change a proposal row (``Reader.proposal``) makes, ready to render."""
    base: bytes = p["base"] or b""
    result: bytes = p["content"]
    mode: str = p["mode"]
    if mode == "delete":
        deleted = render.render(base)
        out = ChangeView(mode, "delete", len(base), 0, deleted=deleted)
        out.removed = len(diff.lines_of(t)) if (t := diff.as_text(base)) is not None else 0
        if deleted.kind == "text":
            out.hidden_removed = deleted.hidden
        return out
    found = diff.diff(base, result)
    out = ChangeView(mode, found.kind, found.old_size, found.new_size, found.added, found.removed)
    out.too_many, out.too_many_why = found.too_many, found.too_many_why
    if found.kind == "binary":
        out.old_hex, out.new_hex = render.hex_view(base, HEX_BYTES), render.hex_view(result, HEX_BYTES)
        return out
    counts = {"removed": out.hidden_removed, "added": out.hidden_added, "context": out.hidden_context}
    for hunk in found.hunks:
        rows = [
            Row(line.kind, line.old, line.new, render.line_marks(line.text, counts[line.kind]), line.no_newline)
            for line in hunk.lines
        ]
        out.hunks.append(HunkView(hunk.header, rows))
    return out


def on_disk(p: dict[str, Any]) -> OnDisk:
    """Whether approving can still apply: the destination read now against the proposal's base."""
    try:
        if p["mode"] == "create":
            found = read_at(Path(p["workspace"]), p["path"], 0)
            if found.kind == "missing":
                return OnDisk("same")
            what = "a file" if found.kind == "file" else f"a {found.kind}"
            return OnDisk("changed", f"{what.capitalize()} now exists at the destination")
        found = read_at(Path(p["workspace"]), p["path"], p["base_size"] or 0)
    except OSError as exc:
        return OnDisk("unknown", f"The destination cannot be read now ({exc.strerror or exc})")
    if found.kind != "file":
        now = {"missing": "gone", "blocked": "behind a symlink or a file where a folder was"}.get(
            found.kind, f"a {found.kind}, not a regular file"
        )
        return OnDisk("changed", f"The file is {now}")
    if found.data is None:
        return OnDisk("changed", f"The file is now {found.size:,} bytes, not {p['base_size']:,}")
    digest = hashlib.sha256(found.data).hexdigest()
    if digest != p["base_sha256"]:
        return OnDisk("changed", f"The file now has sha256 {digest[:12]}…, not {p['base_sha256'][:12]}…")
    return OnDisk("same")
