"""What the review page warns about a proposal, from its bytes alone: characters a reader cannot
see or that reorder what they see (U+200B, U+202E …), bytes that are not UTF-8 text, and a size
too large to read in a glance (over 64 KiB, either side of a change).

The queue shows these in the proposal's row, and a batch approval (one passkey signature over many
rows) refuses a proposal that has any: it is approved from its own page, where the warning stands
beside the content. Hidden characters are counted as the page counts them (``review.render``): in
the bytes, and in the arguments as the page prints them (JSON, two-space indent, not ASCII-escaped).
For a change both sides are read, so a hidden character anywhere in the file is named (the page's
diff may show only the lines around the change). No HTTP and no store here: callers fetch the bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gatekeeper import humane
from gatekeeper.content import invisible

LARGE = 64 * 1024  # bytes; above this a proposal is read on its own page, not approved from a row
_PLAIN = frozenset("\n\t" + "".join(map(chr, range(0x20, 0x7F))))  # as review.render: these never hide in text


@dataclass(frozen=True)
class Caution:
    kind: str  # "invisible", "binary" or "large"
    text: str  # what the row says, e.g. "3 invisible characters, 1 bidirectional (U+200B, U+202E)"


def cautions(
    *, mode: str, size: int, base_size: int | None, content: bytes | None, base: bytes | None, arguments: str
) -> list[Caution]:
    """The warnings for one proposal. ``content``/``base`` may be None when over ``LARGE`` (callers
    need not fetch what the size alone already decides)."""
    biggest = max(size, base_size or 0)
    if biggest > LARGE:
        return [Caution("large", f"large: {humane.size(biggest)} ({biggest:,} bytes), over 64 KiB")]
    sides = [b for b in (content, base if mode != "create" else None) if b]
    found: list[Caution] = []
    texts: list[str] = []
    for side in sides:
        try:
            texts.append(side.decode("utf-8"))
        except UnicodeDecodeError:
            found = [Caution("binary", "binary: not UTF-8 text, shown as hex on its page")]
    seen = Hidden()
    in_content = sum(seen.count(text) for text in texts)
    in_arguments = seen.count(printed_arguments(arguments))
    if seen.codes:
        found.append(Caution("invisible", seen.describe(in_content, in_arguments)))
    return found


class Hidden:
    """Hidden characters counted across texts: how many are bidirectional, and which code points."""

    def __init__(self) -> None:
        self.bidi = 0
        self.codes: dict[str, None] = {}  # in order of first sight

    def count(self, text: str) -> int:
        """The hidden characters in ``text``: each distinct character is judged once and counted
        with ``str.count``: 50 rows of 64 KiB of CJK text (content and arguments) in ~0.2 s, where
        judging every character took 2 s."""
        hidden = sorted((ch for ch in set(text) - _PLAIN if invisible.is_invisible(ch)), key=text.index)
        n = 0
        for ch in hidden:
            times = text.count(ch)
            n += times
            self.bidi += times if ord(ch) in invisible.BIDI else 0
            self.codes[invisible.code_point(ch)] = None
        return n

    def describe(self, in_content: int, in_arguments: int) -> str:
        """ "1 invisible character in the content, 1 in the arguments, 2 of them bidirectional: U+202E" """
        parts = [(n, part) for n, part in ((in_content, "content"), (in_arguments, "arguments")) if n]
        (n, part), rest = parts[0], parts[1:]
        what = f"{n} invisible character{'s' if n != 1 else ''} in the {part}"
        what += "".join(f", {m} in the {other}" for m, other in rest)
        if self.bidi:
            what += f", {self.bidi} of them bidirectional" if in_content + in_arguments > 1 else ", bidirectional"
        listed = ", ".join(list(self.codes)[:4]) + (" …" if len(self.codes) > 4 else "")
        return f"{what}: {listed}"


def printed_arguments(arguments: str) -> str:
    """The arguments as the proposal page prints them (so the count is the page's)."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments
