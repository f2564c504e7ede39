"""The bundled notes server (the demo's and the tests' downstream) says what went wrong in its own
words: a server behind Gatekeeper is what the host's agent reads when a call fails."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mcp import types

from tests.helpers import budget
from tests.proxy_support import PY, direct

pytestmark = pytest.mark.anyio


def text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


async def test_a_missing_or_outside_note_gets_a_clear_error_even_with_a_10_mb_path(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "hello.md").write_text("hi\n")
    async with direct([PY, "-m", "gatekeeper.demo.notes_server", str(tmp_path)]) as d:
        missing = await d.call_tool("read_note", {"path": "notes/nope.md"})
        assert missing.is_error and text(missing).endswith("no note at 'notes/nope.md': list_notes shows every note")
        folder = await d.call_tool("read_note", {"path": "notes"})
        assert folder.is_error and text(folder).endswith("no note at 'notes': list_notes shows every note")
        outside = await d.call_tool("read_note", {"path": "../secret.md"})
        assert outside.is_error and "'../secret.md' is outside the notes folder" in text(outside)
        started = time.monotonic()
        huge = await d.call_tool("read_note", {"path": "a" * 10_000_000})
        took = time.monotonic() - started
        assert huge.is_error and len(text(huge)) < 300, text(huge)[:300]  # the path is cut, not echoed whole
        assert took < budget(15), f"{took:.1f} s to refuse a 10 MB path"  # a traceback of it took 20-40 s
        assert text(await d.call_tool("read_note", {"path": "notes/hello.md"})) == "hi\n"
