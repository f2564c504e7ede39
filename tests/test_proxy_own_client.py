"""The proxy's own client toward stdio children (proxy/servers/stdio/client.py over childrpc/negotiate), the
only one there is: calls, exact big integers, progress, and a child dying mid-call then started again,
in both eras, with the proxy's log saying which client served each life."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import types

from gatekeeper.home import Home
from tests.helpers import await_until
from tests.proxy_support import proxied, write_policy

pytestmark = pytest.mark.anyio


def text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_calls_progress_and_a_dying_child_through_our_own_client(tmp_path: Path, home: Home, mode: str) -> None:
    policy = write_policy(tmp_path, probe=True)
    (tmp_path / "workspace" / "notes" / "seed.md").write_text("seeded\n")
    reports: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append(done)

    async with proxied(policy, home.path, mode) as p:
        names = {t.name for t in (await p.list_tools()).tools}
        assert {"notes__read_note", "probe__echo", "probe__steps"} <= names
        assert text(await p.call_tool("notes__read_note", {"path": "notes/seed.md"})) == "seeded\n"
        echoed = await p.call_tool("probe__echo", {"value": {"big": 12345678901234567890123}})
        assert echoed.structured_content == {"value": {"big": 12345678901234567890123}}
        await p.call_tool("probe__steps", {"n": 3}, progress_callback=progress)
        await await_until(lambda: len(reports) == 3, 10, "three progress reports")
        gone = await p.call_tool("probe__die", {})
        assert gone.is_error and "stopped during the call" in text(gone)
        assert not (await p.call_tool("probe__echo", {"value": 1})).is_error  # started again
    log = (home.path / "logs" / "proxy.log").read_text()
    assert log.count("our own client toward the child") >= 3  # notes, probe, and the probe again
