"""A server on the Python SDK 1.x behind the proxy, in the `auto` downstream mode and in the
default `match` mode (which is `auto` toward a 2026 host and `legacy` toward a 2025 one).

The server (tests/peers/old_sdk_notes.py, FastMCP on mcp==1.6.0 in its own venv) fails on the
2026 `server/discover` probe. The proxy must start it again on `initialize`, once, and use
that era for every later start of the same proxy. A 2025 host under `match` never probes it.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from mcp import Client, types

from gatekeeper.home import Home
from tests.helpers import LAST_RESORT
from tests.peers.external import old_notes_policy
from tests.process_support import alive, started, wait_gone
from tests.proxy_support import events, proxied

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


async def after_the_kill(p: Client) -> None:
    """The first call after the server was killed: either the proxy had not yet seen the pipe close,
    so the call went to the dead server and is an error that says so, or it had (the proxy reads the
    end of the pipe as soon as it is scheduled, which on a loaded machine can be after the call left),
    so the call started the server again and was answered. Which one is a race; both are right."""
    result = await p.call_tool("read_note", {"path": "notes/seed.md"})
    if result.is_error:
        assert "stopped during the call" in text(result) or "closed its connection" in text(result), text(result)
    else:
        assert text(result) == "seeded by hand\n"


# (the host's mode, the proxy's --downstream-mode): a 2026 host under the default, and `auto` as ever
@pytest.mark.parametrize(("mode", "downstream"), [("auto", "match"), ("auto", "auto"), ("legacy", "auto")])
async def test_auto_mode_falls_back_to_initialize_and_remembers_the_era(
    tmp_path: Path, home: Home, mode: str, downstream: str
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    policy = old_notes_policy(tmp_path, pid_dir=pids)
    (tmp_path / "workspace" / "notes" / "seed.md").write_text("seeded by hand\n")
    try:
        async with proxied(policy, home.path, mode, ("--downstream-mode", downstream)) as p:
            names = {t.name for t in (await p.list_tools()).tools}
            assert {"read_note", "add_note", "server_pid"} <= names
            assert text(await p.call_tool("read_note", {"path": "notes/seed.md"})) == "seeded by hand\n"
            index = await p.read_resource("notes://index")
            assert [c.text for c in index.contents] == ["notes/seed.md"]  # type: ignore[union-attr]
            first = int(text(await p.call_tool("server_pid", {})))
            assert len(started(pids)) == 2  # the one that died on the probe, and the one serving
            os.kill(first, signal.SIGKILL)
            wait_gone({first}, timeout=LAST_RESORT)
            await after_the_kill(p)
            # The next call restarts it, straight on initialize: no probe, so one more start only.
            assert text(await p.call_tool("read_note", {"path": "notes/seed.md"})) == "seeded by hand\n"
            second = int(text(await p.call_tool("server_pid", {})))
            assert second != first and len(started(pids)) == 3
    finally:
        for pid in started(pids):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    starts = [json.loads(e[2]) for e in events(home.path, "server_started")]
    assert [(s["mode"], s["era"], s["era_remembered"]) for s in starts] == [
        ("legacy", "legacy", False),
        ("legacy", "legacy", True),
    ]
    assert starts[0]["probe_error"] and starts[1]["probe_error"] is None
    assert not events(home.path, "server_failed")  # the probe's failure is not a failed start
    log = (home.path / "logs" / "notes.log").read_text()
    assert log.count(f"starting notes ({downstream})") == 1 and log.count("starting notes (legacy)") == 2


async def test_a_2025_host_under_match_starts_it_on_initialize_without_a_probe(tmp_path: Path, home: Home) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    policy = old_notes_policy(tmp_path, pid_dir=pids)
    (tmp_path / "workspace" / "notes" / "seed.md").write_text("seeded by hand\n")
    try:
        async with proxied(policy, home.path, "legacy") as p:
            assert text(await p.call_tool("read_note", {"path": "notes/seed.md"})) == "seeded by hand\n"
            first = int(text(await p.call_tool("server_pid", {})))
            assert len(started(pids)) == 1  # the early child, adopted and spoken to on initialize
            os.kill(first, signal.SIGKILL)
            wait_gone({first}, timeout=LAST_RESORT)
            await after_the_kill(p)
            assert text(await p.call_tool("read_note", {"path": "notes/seed.md"})) == "seeded by hand\n"
            assert len(started(pids)) == 2
    finally:
        for pid in started(pids):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    starts = [json.loads(e[2]) for e in events(home.path, "server_started")]
    assert [(s["mode"], s["era"], s["probe_error"]) for s in starts] == [("legacy", "legacy", None)] * 2


async def test_a_proposal_to_the_old_server_is_held(tmp_path: Path, home: Home) -> None:
    policy = old_notes_policy(tmp_path)
    async with proxied(policy, home.path) as p:
        proposed = await p.call_tool("add_note", {"title": "From an old server", "body": "held\n"})
        assert not proposed.is_error, text(proposed)
        assert proposed.structured_content["status"] == "pending_approval"  # type: ignore[index]
        assert proposed.structured_content["destination"] == "notes/from-an-old-server.md"  # type: ignore[index]
    assert not (tmp_path / "workspace" / "notes" / "from-an-old-server.md").exists()
