"""A logged-in Chromium tab for the end-to-end tests (the review page over real HTTP)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS
from tests.test_review_browser import log_in


@contextmanager
def logged_in_tab(base_url: str, shots: Path) -> Iterator[Any]:
    """One Chromium tab logged in as the test reviewer; ``shots`` (for screenshots) is emptied first."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page()
            log_in(tab, base_url)
            yield tab
        finally:
            browser.close()
