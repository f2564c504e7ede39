"""Destinations a reader would misread, refused by the real proxy subprocess with a message that says
which character, where, and what to do instead (issue 9, items 1 and 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatekeeper.home import Home
from tests.proxy_support import events, files_under, proxied, rows, write_policy

pytestmark = pytest.mark.anyio


async def test_invisible_characters_and_space_runs_are_refused_with_a_clear_error(tmp_path: Path, home: Home) -> None:
    policy = write_policy(tmp_path)
    workspace = tmp_path / "workspace"
    (workspace / "notes" / "q3 report.md").write_text("the real report\n")
    before = files_under(workspace)
    cases = {
        "notes/\u2800x.md": "it contains U+2800 BRAILLE PATTERN BLANK (invisible) at position 7 "
        "(use visible characters only",
        "notes/x\u3164.md": "U+3164 HANGUL FILLER (invisible) at position 8",
        "notes/x\ufe0f.md": "U+FE0F VARIATION SELECTOR-16 (invisible) at position 8",
        "notes/q3  report.md": "it has 2 spaces in a row at position 9, which a reader takes for one "
        "(use single spaces between words)",
        "notes/q3 report.md ": "the name 'q3 report.md ' ends with a space",
    }
    async with proxied(policy, home.path) as p:
        for raw, expected in cases.items():
            result = await p.call_tool("write_note", {"path": raw, "body": "pwned"})
            assert result.is_error, f"{raw!r} was accepted"
            text = result.content[0].text
            assert text.startswith("Not proposed: destination ") and expected in text, text
            assert raw not in text or raw.isascii()  # the invisible character is written as an escape
    assert files_under(workspace) == before
    assert rows(home.db_path, "SELECT count(*) FROM proposal") == [(0,)]
    refused = [json.loads(payload) for _, _, payload in events(home.path, "proposal_refused")]
    assert len(refused) == len(cases)
    assert "U+2800 BRAILLE PATTERN BLANK" in json.dumps(refused[0], ensure_ascii=False)
