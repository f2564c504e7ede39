"""The proxy with ``GATEKEEPER_PROXY_HOST=lean``: our own host side (proxy/hostlean.py) instead of the SDK
server. Running tests/test_proxy_host_contract.py with the switch set holds every case; this file keeps
the switch covered in the default run: a few raw-host cases, and the official client as the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import types

from gatekeeper.home import Home
from tests.helpers import await_until
from tests.host_contract_support import play, raw_proxy
from tests.proxy_support import proxied, write_policy
from tests.test_proxy_host_contract import CASES

LEAN_MARK = "host side: lean"
"""What the proxy logs when it serves the host itself: proof the switch took effect."""


def served_lean(home: Home) -> bool:
    log = home.log_dir / "proxy.log"
    return log.exists() and LEAN_MARK in log.read_text(encoding="utf-8")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "name", ["initialize-2025-11-25-then-ping", "tools-list-2025", "tools-list-2026", "own-tool-errors-2026"]
)
def test_a_raw_host_gets_todays_answers_from_our_own_host_side(
    name: str, tmp_path: Path, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEKEEPER_PROXY_HOST", "lean")
    case = CASES[name]
    with raw_proxy(tmp_path, home.path) as proxy:
        transcript = play(proxy, tmp_path, case.steps)
    if case.any_order:
        assert sorted(transcript, key=json.dumps) == sorted(case.transcript, key=json.dumps)
    else:
        assert transcript == case.transcript
    assert served_lean(home)


@pytest.mark.anyio
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_official_client_lists_and_calls_through_our_own_host_side(
    tmp_path: Path, home: Home, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEKEEPER_PROXY_HOST", "lean")
    policy = write_policy(tmp_path, probe=True)
    (tmp_path / "workspace" / "notes" / "seed.md").write_text("seeded\n")
    reports: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append(done)

    async with proxied(policy, home.path, mode) as p:
        names = {t.name for t in (await p.list_tools()).tools}
        assert {"notes__read_note", "probe__echo", "probe__steps"} <= names
        read = await p.call_tool("notes__read_note", {"path": "notes/seed.md"})
        assert isinstance(read.content[0], types.TextContent) and read.content[0].text == "seeded\n"
        echoed = await p.call_tool("probe__echo", {"value": {"big": 12345678901234567890123}})
        assert echoed.structured_content == {"value": {"big": 12345678901234567890123}}
        await p.call_tool("probe__steps", {"n": 3}, progress_callback=progress)
        await await_until(lambda: len(reports) == 3, 10, "three progress reports")
    assert served_lean(home)
