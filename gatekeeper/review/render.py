"""Show proposed bytes exactly as they will be written: text with every invisible, bidirectional
and control character made visible and counted, or a hex dump when the bytes are not UTF-8.

Produces plain data; the template escapes every piece (autoescape), so nothing in a proposal
is ever rendered as HTML or Markdown.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from gatekeeper.content import invisible

DISPLAY_LIMIT = 256 * 1024  # bytes shown inline; larger proposals say so and offer the raw download
HEX_WIDTH = 16
# A long file or diff shows this much, the rest folded under "show all" (a <details>: no script needed),
# so the page of a 198 KB note is a few screens, not 70,000 pixels. The rest is folded only when it is
# worth a click: a few more lines are shown at once.
FOLD_ROWS = 250
FOLD_CHARS = 16_000  # long lines fill screens too: fold after this many characters, whatever the rows
FOLD_SLACK = 50

# Printable ASCII, newline and tab can never hide; a regex skips them at C speed (1 MiB: 170 → 13 ms).
_CANDIDATE = re.compile(r"[^\n\t\x20-\x7e]")
# In a single-line value (a path) a tab or newline hides as well as any other control.
_CANDIDATE_INLINE = re.compile(r"[^\x20-\x7e]")


@dataclass(frozen=True)
class Mark:
    code: str  # "U+202E"
    name: str
    bidi: bool


Segment = str | Mark


@dataclass(frozen=True)
class Note:
    """Words of the page's own inside shown text (never from the proposal): "the content shown above"."""

    text: str
    note: bool = True  # lets a template tell it from a Mark


Shown = Segment | Note


@dataclass
class Rendering:
    kind: str  # "text", "hex" or "empty"
    lines: list[Sequence[Shown]] = field(default_factory=list)
    hex_rows: list[tuple[str, str, str]] = field(default_factory=list)  # offset, hex, ascii
    hidden: Counter[str] = field(default_factory=Counter)  # "U+202E RIGHT-TO-LEFT OVERRIDE" -> count
    truncated: bool = False
    shown_bytes: int = 0
    total_bytes: int = 0
    final_newline: bool = True
    bidi_count: int = 0

    @property
    def hidden_total(self) -> int:
        return sum(self.hidden.values())

    @property
    def count(self) -> int:
        """Rows shown: lines of text, or lines of the hex dump."""
        return len(self.hex_rows) if self.kind == "hex" else len(self.lines)

    @cached_property
    def fold(self) -> int:
        """How many rows the page shows before "show all"; ``count`` when nothing is folded."""
        if self.kind == "hex":
            return fold_at([HEX_WIDTH] * len(self.hex_rows))
        return fold_at([sum(len(seg) if isinstance(seg, str) else 12 for seg in line) for line in self.lines])

    @property
    def folded_hidden(self) -> int:
        """Invisible characters in the folded rows: the fold's summary names them, so none hide there."""
        return sum(1 for line in self.lines[self.fold :] for seg in line if isinstance(seg, Mark))


def fold_at(sizes: list[int], rows: int = FOLD_ROWS, chars: int = FOLD_CHARS) -> int:
    """Where to fold rows of these lengths: after ``rows`` rows or ``chars`` characters (at least one row
    shown), or nowhere (``len(sizes)``) when fewer than ``FOLD_SLACK`` rows would be left folded."""
    total = 0
    cut = len(sizes)
    for i, n in enumerate(sizes):
        total += n
        if i >= rows or (total > chars and i > 0):
            cut = i
            break
    return len(sizes) if len(sizes) - cut < FOLD_SLACK else cut


def render(content: bytes, limit: int = DISPLAY_LIMIT) -> Rendering:
    if not content:
        return Rendering(kind="empty")
    shown = content[:limit]
    truncated = len(content) > limit
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return _hex(content, shown, truncated)
    if truncated:
        text = shown.decode("utf-8", errors="ignore")  # cut at a character boundary
    out = Rendering(kind="text", truncated=truncated, shown_bytes=len(shown), total_bytes=len(content))
    out.final_newline = text.endswith("\n")
    for raw_line in text.split("\n")[: -1 if out.final_newline else None]:
        line = _marked(raw_line, _CANDIDATE, out.hidden)
        out.bidi_count += sum(1 for seg in line if isinstance(seg, Mark) and seg.bidi)
        out.lines.append(line)
    return out


def arguments(raw: str, content: bytes, encoding: str, note: str) -> Rendering:
    """The call's arguments as indented JSON, marked like content. A top-level string that is the
    content itself (as text, or as base64 under a base64 rule) is not shown a second time: its value
    reads ``note`` instead, so a 198 KB note is not repeated as one 198 KB JSON string."""
    found = json.loads(raw)
    repeats = (
        []
        if not content or not isinstance(found, dict)
        else [key for key, value in found.items() if isinstance(value, str) and _is_content(value, content, encoding)]
    )
    shown = {key: None if key in repeats else value for key, value in found.items()} if repeats else found
    text = json.dumps(shown, indent=2, ensure_ascii=False)
    out = render(text.encode("utf-8"))
    stubs = {f"  {json.dumps(key, ensure_ascii=False)}: null{comma}" for key in repeats for comma in ("", ",")}
    for i, line in enumerate(text.split("\n")):
        if line in stubs and i < len(out.lines):  # a top-level key's line: two spaces, nothing nested
            comma = "," if line.endswith(",") else ""
            segments = list(out.lines[i])
            last = segments.pop()
            assert isinstance(last, str)  # the line ends in ASCII "null"
            head = last[: -len("null" + comma)]
            out.lines[i] = [*segments, *([head] if head else []), Note(note), *([comma] if comma else [])]
    return out


def _is_content(value: str, content: bytes, encoding: str) -> bool:
    if encoding == "base64":
        try:
            return base64.b64decode(value, validate=True) == content
        except (binascii.Error, ValueError):
            return False
    return value.encode("utf-8", errors="surrogatepass") == content


def line_marks(line: str, counts: Counter[str]) -> list[Segment]:
    """One line of a file (no newline in it) as text and marks, counted into ``counts``."""
    return _marked(line, _CANDIDATE, counts)


def hex_view(content: bytes, limit: int) -> Rendering:
    """The first ``limit`` bytes as a hex dump, whatever they are (a binary change shows both sides)."""
    if not content:
        return Rendering(kind="empty")
    return _hex(content, content[:limit], len(content) > limit)


def marks(text: str) -> list[Segment]:
    """A one-line value (a path, a name) as text and marks; every control, tab and newline is marked."""
    return _marked(text, _CANDIDATE_INLINE, Counter())


def _marked(line: str, candidates: re.Pattern[str], counts: Counter[str]) -> list[Segment]:
    segments: list[Segment] = []
    pos = 0
    for match in candidates.finditer(line):  # only non-ASCII or control characters can hide
        ch = match.group()
        if not invisible.is_invisible(ch):
            continue
        if match.start() > pos:
            segments.append(line[pos : match.start()])
        mark = Mark(invisible.code_point(ch), invisible.name(ch), ord(ch) in invisible.BIDI)
        counts[f"{mark.code} {mark.name}"] += 1
        segments.append(mark)
        pos = match.end()
    if pos < len(line):
        segments.append(line[pos:])
    return segments


def _hex(content: bytes, shown: bytes, truncated: bool) -> Rendering:
    out = Rendering(kind="hex", truncated=truncated, shown_bytes=len(shown), total_bytes=len(content))
    for offset in range(0, len(shown), HEX_WIDTH):
        chunk = shown[offset : offset + HEX_WIDTH]
        hex_part = " ".join(f"{b:02x}" for b in chunk)
        ascii_part = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        out.hex_rows.append((f"{offset:08x}", hex_part, ascii_part))
    return out
