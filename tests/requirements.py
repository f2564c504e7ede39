"""One door for tests that need something this machine may lack (Chromium, a real MCP peer).

A local run skips such a test loudly, with what is missing and how to get it. Under CI=true (CI sets
it) the same test fails instead: a broken install must not turn the browser, interop and demo tests
into green skips.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

CHROMIUM = "/usr/bin/chromium"


def in_ci() -> bool:
    """CI sets CI=true; nothing else counts, so a developer's shell never fails by accident."""
    return os.environ.get("CI", "").strip().lower() == "true"


def missing(what: str, how: str) -> NoReturn:
    """Fail under CI=true, else skip, saying what is missing and how to get it."""
    if in_ci():
        pytest.fail(f"CI=true and {what} is missing: {how}", pytrace=False)
    pytest.skip(f"SKIPPED LOUDLY: {what} is missing: {how} (under CI=true this test fails)")


def require(ok: bool, what: str, how: str) -> None:
    """Go on when ``ok``; otherwise :func:`missing`."""
    if not ok:
        missing(what, how)


def require_chromium(path: str = CHROMIUM) -> None:
    require(Path(path).exists(), f"Chromium ({path})", "`make browser` installs Debian's chromium package")
