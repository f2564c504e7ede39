"""obsidian-mcp runs here as a real peer: started directly (no Gatekeeper) by the official client in both
protocol eras, it lists its tools and appends to a note byte for byte (no separator, no newline added)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from tests.obsidian_support import make_vault, obsidian_params
from tests.proxy_support import files_under

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("mode", "protocol"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_obsidian_mcp_appends_to_a_note(tmp_path: Path, mode: str, protocol: str) -> None:
    vault = make_vault(tmp_path / "vault")
    (vault / "daily").mkdir()
    (vault / "daily" / "log.md").write_bytes(b"# Log\r\nfirst line")
    with open(tmp_path / "obsidian-stderr.log", "w") as errlog:
        async with Client(stdio_client(obsidian_params(vault), errlog=errlog), mode=mode, cache=None) as c:
            assert c.protocol_version == protocol
            assert c.server_info is not None and (c.server_info.name, c.server_info.version) == (
                "obsidian-mcp-server",
                "2.0.1",
            )
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert {"obsidian_create_note", "obsidian_read_note", "obsidian_edit_note"} <= tools.keys()
            edit = tools["obsidian_edit_note"].input_schema
            assert edit["required"] == ["vault", "path", "operation", "content"]
            assert edit["properties"]["operation"]["enum"] == ["append", "prepend", "replace"]
            result = await c.call_tool(
                "obsidian_edit_note",
                {"vault": "notes", "path": "daily/log", "operation": "append", "content": "second — line\n"},
            )
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["ok"] is True and result.structured_content["data"]["path"] == "daily/log.md"
    notes = {k: v for k, v in files_under(vault).items() if not k.startswith(".obsidian-mcp/")}
    assert notes == {"daily/log.md": "# Log\r\nfirst linesecond — line\n".encode()}
