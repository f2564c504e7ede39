"""The embedded Default_Ignorable_Code_Point table, and the one rule for "a reader cannot see this"."""

from __future__ import annotations

import shutil
import subprocess
import unicodedata
from itertools import pairwise

import pytest

from gatekeeper.content import invisible
from gatekeeper.content.unicode_ignorable import RANGES, TOTAL_CODE_POINTS, UNICODE_VERSION, is_default_ignorable

# Found passing as destinations by the attack in issue 9, with more of their kind.
MEMBERS = [
    0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180E, 0x180F, 0x200B, 0x200F,
    0x202E, 0x2060, 0x2065, 0x2069, 0x206F, 0x3164, 0xFE00, 0xFE0F, 0xFEFF, 0xFFA0, 0xFFF0, 0xFFF8,
    0x1BCA0, 0x1D173, 0x1D17A, 0xE0000, 0xE0001, 0xE0020, 0xE007F, 0xE0100, 0xE01EF, 0xE0FFF,
]  # fmt: skip
NON_MEMBERS = [
    0x0020, 0x0041, 0x00A0, 0x00AC, 0x00AE, 0x034E, 0x0350, 0x0600, 0x06DD, 0x070F, 0x1161, 0x17B3,
    0x17B6, 0x180A, 0x1810, 0x2000, 0x200A, 0x2010, 0x2029, 0x2070, 0x2800, 0x3000, 0x3163, 0x3165,
    0xFDFF, 0xFE10, 0xFEFE, 0xFF00, 0xFFF9, 0xFFFB, 0xFFFC, 0x110BD, 0x1D172, 0x1D17B, 0xDFFFF, 0xE1000,
    0x1F600,
]  # fmt: skip


def test_the_table_is_the_whole_section_in_order() -> None:
    assert unicodedata.unidata_version == UNICODE_VERSION  # the same Unicode as the rest of the checks
    assert sum(end - start + 1 for start, end in RANGES) == TOTAL_CODE_POINTS == 4174
    for (_, end), (start, _) in pairwise(RANGES):
        assert end < start


@pytest.mark.parametrize("code", MEMBERS, ids=hex)
def test_known_members(code: int) -> None:
    assert is_default_ignorable(chr(code))
    assert invisible.is_invisible(chr(code))


@pytest.mark.parametrize("code", NON_MEMBERS, ids=hex)
def test_known_non_members(code: int) -> None:
    assert not is_default_ignorable(chr(code))


@pytest.mark.skipif(shutil.which("perl") is None, reason="perl is not installed")
def test_the_table_equals_perls_copy_of_the_unicode_database() -> None:
    """An independent copy of DerivedCoreProperties (Perl's Unicode::UCD), when it is the same version."""
    script = (
        "use Unicode::UCD qw(prop_invlist); print Unicode::UCD::UnicodeVersion(), qq(\\n);"
        "print join(qq( ), prop_invlist(q(Default_Ignorable_Code_Point))), qq(\\n);"
    )
    out = subprocess.run(["perl", "-e", script], capture_output=True, text=True, check=True).stdout.split("\n")
    if out[0] != UNICODE_VERSION:
        pytest.skip(f"perl has Unicode {out[0]}, the table is {UNICODE_VERSION}")
    bounds = [int(x) for x in out[1].split()]
    theirs = {c for start, end in zip(bounds[::2], bounds[1::2], strict=True) for c in range(start, end)}
    ours = {c for start, end in RANGES for c in range(start, end + 1)}
    assert ours == theirs


@pytest.mark.parametrize(
    "code, kind",
    [
        (0x2800, "invisible"),  # BRAILLE PATTERN BLANK: So, draws as nothing
        (0x1D159, "invisible"),  # MUSICAL SYMBOL NULL NOTEHEAD
        (0x3164, "invisible"),
        (0xFE0F, "invisible"),
        (0x202E, "bidirectional control"),
        (0x0009, "control character"),
        (0x0085, "control character"),
        (0x2028, "line separator"),
        (0x2009, "space other than U+0020"),
        (0xE000, "private-use character"),
        (0x0378, "unassigned code point"),
        (0x0020, None),
        (0x00E9, None),
        (0x65E5, None),
        (0x1F600, None),
    ],
    ids=lambda v: hex(v) if isinstance(v, int) else str(v),
)
def test_kinds(code: int, kind: str | None) -> None:
    assert invisible.kind(chr(code)) == kind


def test_names_and_escapes() -> None:
    assert invisible.name("\u2800") == "BRAILLE PATTERN BLANK"
    assert invisible.name("\t") == "TAB" and invisible.name("\x85") == "CONTROL CHARACTER"
    assert invisible.escaped("a \u2800\\b\t\U000e0100") == "'a \\u2800\\\\b\\x09\\U000e0100'"
