"""The child speaks the host's protocol era (``--downstream-mode match``, the default; issue 12).

The bundled notes server (SDK 2.3) speaks both eras. Under ``match`` it is spawned before the
host's first line (cold start) and spoken to once that line shows the era: a 2025 host's
``initialize`` gets a 2025-11-25 child, a 2026-07-28 request a 2026 child. ``auto`` stays what it
was: the child in 2026 whatever the host speaks. The era is read from the ``server_started``
event (proxy/servers/downstream.py ``_started``) and the child's log.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from tests.helpers import budget, wait_until
from tests.process_support import alive, wait_gone
from tests.proxy_support import events, proxied, write_policy
from tests.test_proxy_wire import ENVELOPE, INIT, RawProxy

pytestmark = pytest.mark.slow

SEED = "seeded by hand\n"


def children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (read from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        if int(parent) == pid and state != "Z":
            found.add(int(stat.parent.name))
    return found


def starts(home: Home) -> list[dict[str, Any]]:
    return [json.loads(e[2]) for e in events(home.path, "server_started")]


def seeded(tmp_path: Path) -> Path:
    policy = write_policy(tmp_path)
    (tmp_path / "workspace" / "notes" / "seed.md").write_text(SEED)
    return policy


def spawned_in_silence(proxy: RawProxy, home: Home) -> int:
    """The notes child, running before the host has written a byte: the early spawn kept."""
    log = home.log_dir / "notes.log"
    wait_until(lambda: log.exists() and "demo-notes: serving" in log.read_text(), 30, "the notes child's start")
    (child,) = children(proxy.proc.pid)
    assert proxy.lines == []  # nothing asked, nothing answered
    return child


def read_seed(proxy: RawProxy, meta: dict[str, Any] | None = None) -> str:
    params: dict[str, Any] = {"name": "read_note", "arguments": {"path": "notes/seed.md"}}
    if meta:
        params["_meta"] = meta
    proxy.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
    answer = proxy.wait_for(3)
    return str(answer["result"]["content"][0]["text"])


@pytest.mark.parametrize(
    ("args", "protocol", "era"),
    [((), "2025-11-25", "legacy"), (("--downstream-mode", "auto"), "2026-07-28", "modern")],
    ids=["match", "auto"],
)
def test_a_2025_host_gets_a_child_in_its_era_spawned_before_its_first_line(
    tmp_path: Path, home: Home, args: tuple[str, ...], protocol: str, era: str
) -> None:
    proxy = RawProxy(seeded(tmp_path), home.path, *args)
    try:
        child = spawned_in_silence(proxy, home)
        proxy.send(INIT)
        hello = proxy.wait_for(1)["result"]
        assert hello["protocolVersion"] == "2025-11-25"
        # The child's handshake starts on this initialize and ends within the capability wait: its
        # completions are offered (were the era learnt only after initialize, the wait would run out).
        assert hello["capabilities"]["completions"] == {}
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert read_seed(proxy) == SEED
        assert children(proxy.proc.pid) == {child}  # the early child was adopted, not spawned again
    finally:
        proxy.close()
    (started,) = starts(home)
    assert (started["protocol_version"], started["era"], started["probe_error"]) == (protocol, era, None)
    log = (home.log_dir / "notes.log").read_text()
    assert log.count("--- gatekeeper: starting notes") == 1
    assert ("the host speaks 2025-11-25: connecting to notes in legacy mode" in log) == (not args)


def test_a_raw_2026_host_gets_a_2026_child(tmp_path: Path, home: Home) -> None:
    """No initialize, no discover: the first request's 2026 envelope is what tells the era."""
    proxy = RawProxy(seeded(tmp_path), home.path)
    try:
        spawned_in_silence(proxy, home)
        assert read_seed(proxy, ENVELOPE) == SEED
    finally:
        proxy.close()
    (started,) = starts(home)
    assert (started["protocol_version"], started["mode"], started["era"]) == ("2026-07-28", "auto", "modern")


@pytest.mark.anyio
@pytest.mark.parametrize(("host", "protocol"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_an_sdk_host_gets_a_child_in_its_era(tmp_path: Path, home: Home, host: str, protocol: str) -> None:
    async with proxied(seeded(tmp_path), home.path, host) as client:
        assert client.protocol_version == protocol
        read = await client.call_tool("read_note", {"path": "notes/seed.md"})
        assert read.content[0].text == SEED  # type: ignore[union-attr]
    assert [(s["protocol_version"], s["mode"]) for s in starts(home)] == [
        (protocol, "auto" if host == "auto" else "legacy")
    ]


def test_a_host_that_never_speaks_leaves_the_child_unspoken_to_and_ends_it_at_eof(tmp_path: Path, home: Home) -> None:
    """Nothing needs the child before the host's first request: it waits, spawned, however long;
    the host's EOF ends it as ever (the proxy's lifespan, not the early-start clean-up, ends it)."""
    proxy = RawProxy(seeded(tmp_path), home.path)
    try:
        child = spawned_in_silence(proxy, home)
        wait_until(lambda: events(home.path, "proxy_started"), 30, "the proxy's lifespan (its children supervised)")
        assert proxy.proc.stdin is not None
        proxy.proc.stdin.close()
        begun = time.monotonic()
        assert proxy.proc.wait(timeout=10) == 0
        assert time.monotonic() - begun < budget(3)
        wait_gone({child}, timeout=5)
        assert not alive(child)
    finally:
        proxy.close()
    assert not events(home.path, "server_started") and not events(home.path, "server_failed")
