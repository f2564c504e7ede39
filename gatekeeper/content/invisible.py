"""Which characters a reader cannot see, or that change what they see: one answer for the whole app.

Destinations refuse them (gatekeeper.content.paths); the review page marks and counts them
(gatekeeper.review.render). General categories alone miss many: the Unicode
Default_Ignorable_Code_Point property (gatekeeper.content.unicode_ignorable) adds Hangul fillers,
variation selectors, U+034F, U+17B4..., and a few visible-category characters draw as blank.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from gatekeeper.content.unicode_ignorable import is_default_ignorable

# Bidirectional controls: they reorder what the reader sees around them.
BIDI = frozenset({0x200E, 0x200F, 0x061C} | set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A)))
# Assigned, not default-ignorable, but drawn as nothing in common fonts ("their kind" of U+3164).
BLANK_GLYPHS = {
    0x2800: "BRAILLE PATTERN BLANK",
    0x1D159: "MUSICAL SYMBOL NULL NOTEHEAD",
}
# Hangul fillers and variation selectors are default-ignorable already; listed so the rule does not
# depend on one table alone (and so tests can name them).
HANGUL_FILLERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0})
VARIATION_SELECTORS = frozenset(
    set(range(0x180B, 0x180E)) | {0x180F} | set(range(0xFE00, 0xFE10)) | set(range(0xE0100, 0xE01F0))
)
_CONTROL_NAMES = {0: "NULL", 8: "BACKSPACE", 9: "TAB", 0x0A: "LINE FEED", 0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE"}
_CATEGORY_KINDS = {
    "Cc": "control character",
    "Cf": "invisible formatting character",
    "Cs": "surrogate",
    "Co": "private-use character",
    "Cn": "unassigned code point",
    "Zl": "line separator",
    "Zp": "paragraph separator",
}


@lru_cache(maxsize=8192)  # text repeats its characters: 1 MiB of CJK renders in 0.14 s, not 0.38 s
def kind(ch: str) -> str | None:
    """What makes ``ch`` unsafe to show as is, in a few words; None for an ordinary visible character.

    Space (U+0020) counts as visible here; tab and newline do not (callers that allow them in
    text skip them before asking).
    """
    code = ord(ch)
    if 0x20 < code < 0x7F:
        return None
    if code in BIDI:
        return "bidirectional control"
    category = unicodedata.category(ch)
    if category == "Zs":
        return None if ch == " " else "space other than U+0020"
    if category in ("Cc", "Cs", "Co", "Cn", "Zl", "Zp"):
        return _CATEGORY_KINDS[category]
    if (
        category == "Cf"
        or is_default_ignorable(ch)
        or code in BLANK_GLYPHS
        or code in HANGUL_FILLERS
        or code in VARIATION_SELECTORS
    ):
        return "invisible"
    return None


def is_invisible(ch: str) -> bool:
    """True for a character a reader cannot see, or that reorders or breaks what they see."""
    return kind(ch) is not None


def name(ch: str) -> str:
    """The character's Unicode name, or a description when it has none (controls, unassigned)."""
    code = ord(ch)
    if code < 0x20 or 0x7F <= code < 0xA0:
        return _CONTROL_NAMES.get(code, "DELETE" if code == 0x7F else "CONTROL CHARACTER")
    if code == 0xFEFF:
        return "ZERO WIDTH NO-BREAK SPACE (BOM)"
    if code in BLANK_GLYPHS:
        return BLANK_GLYPHS[code]
    return unicodedata.name(ch, "UNASSIGNED OR PRIVATE CHARACTER")


def code_point(ch: str) -> str:
    """``U+2800`` style, at least four hex digits."""
    return f"U+{ord(ch):04X}"


def escaped(text: str) -> str:
    """``text`` quoted, with every invisible character (and backslash) written as a ``\\uXXXX`` escape.

    For messages: a reader sees where the hidden character is, and the copy they paste is safe.
    """
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch != " " and is_invisible(ch):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"
