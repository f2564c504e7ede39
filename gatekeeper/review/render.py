"""Show proposed bytes exactly as they will be written: text with every invisible, bidirectional
and control character made visible and counted, or a hex dump when the bytes are not UTF-8.

Produces plain data; the template escapes every piece (autoescape), so nothing in a proposal
is ever rendered as HTML or Markdown.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from gatekeeper import invisible

DISPLAY_LIMIT = 256 * 1024  # bytes shown inline; larger proposals say so and offer the raw download
HEX_WIDTH = 16

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


@dataclass
class Rendering:
    kind: str  # "text", "hex" or "empty"
    lines: list[list[Segment]] = field(default_factory=list)
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
