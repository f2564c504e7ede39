"""Unicode's ``Default_Ignorable_Code_Point`` property, which Python's ``unicodedata`` does not expose.

A renderer draws nothing for these code points unless it has a special glyph, so a reviewer
cannot see them; general categories alone miss many (U+034F and U+17B4 are Mn, the Hangul
fillers U+115F, U+1160, U+3164, U+FFA0 are Lo, variation selectors are Mn).

Source: Unicode Character Database 14.0.0, ``DerivedCoreProperties.txt``, section
"Derived Property: Default_Ignorable_Code_Point" ("# Total code points: 4174"),
https://www.unicode.org/Public/14.0.0/ucd/DerivedCoreProperties.txt . 14.0.0 is the version of
Python 3.11's ``unicodedata``, so both tables agree on which code points are assigned. The ranges
below are that section's lines, in its order, one tuple a line; tests/test_unicode_ignorable.py
checks them against Perl's own copy of the database (Unicode::UCD) when Perl is installed.
"""

from __future__ import annotations

from bisect import bisect_right

UNICODE_VERSION = "14.0.0"
TOTAL_CODE_POINTS = 4174  # the section's own "# Total code points" line

RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # Cf       SOFT HYPHEN
    (0x034F, 0x034F),  # Mn       COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # Cf       ARABIC LETTER MARK
    (0x115F, 0x1160),  # Lo   [2] HANGUL CHOSEONG FILLER..HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # Mn   [2] KHMER VOWEL INHERENT AQ..KHMER VOWEL INHERENT AA
    (0x180B, 0x180D),  # Mn   [3] MONGOLIAN FREE VARIATION SELECTOR ONE..THREE
    (0x180E, 0x180E),  # Cf       MONGOLIAN VOWEL SEPARATOR
    (0x180F, 0x180F),  # Mn       MONGOLIAN FREE VARIATION SELECTOR FOUR
    (0x200B, 0x200F),  # Cf   [5] ZERO WIDTH SPACE..RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),  # Cf   [5] LEFT-TO-RIGHT EMBEDDING..RIGHT-TO-LEFT OVERRIDE
    (0x2060, 0x2064),  # Cf   [5] WORD JOINER..INVISIBLE PLUS
    (0x2065, 0x2065),  # Cn       <reserved-2065>
    (0x2066, 0x206F),  # Cf  [10] LEFT-TO-RIGHT ISOLATE..NOMINAL DIGIT SHAPES
    (0x3164, 0x3164),  # Lo       HANGUL FILLER
    (0xFE00, 0xFE0F),  # Mn  [16] VARIATION SELECTOR-1..VARIATION SELECTOR-16
    (0xFEFF, 0xFEFF),  # Cf       ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),  # Lo       HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # Cn   [9] <reserved-FFF0>..<reserved-FFF8>
    (0x1BCA0, 0x1BCA3),  # Cf   [4] SHORTHAND FORMAT LETTER OVERLAP..SHORTHAND FORMAT UP STEP
    (0x1D173, 0x1D17A),  # Cf   [8] MUSICAL SYMBOL BEGIN BEAM..MUSICAL SYMBOL END PHRASE
    (0xE0000, 0xE0000),  # Cn       <reserved-E0000>
    (0xE0001, 0xE0001),  # Cf       LANGUAGE TAG
    (0xE0002, 0xE001F),  # Cn  [30] <reserved-E0002>..<reserved-E001F>
    (0xE0020, 0xE007F),  # Cf  [96] TAG SPACE..CANCEL TAG
    (0xE0080, 0xE00FF),  # Cn [128] <reserved-E0080>..<reserved-E00FF>
    (0xE0100, 0xE01EF),  # Mn [240] VARIATION SELECTOR-17..VARIATION SELECTOR-256
    (0xE01F0, 0xE0FFF),  # Cn [3600] <reserved-E01F0>..<reserved-E0FFF>
)

_STARTS = [start for start, _ in RANGES]


def is_default_ignorable(ch: str) -> bool:
    """True when ``ch`` (one character) has Default_Ignorable_Code_Point=Yes."""
    code = ord(ch)
    i = bisect_right(_STARTS, code) - 1
    return i >= 0 and code <= RANGES[i][1]
