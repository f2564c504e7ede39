"""The proxy's event loop (``GATEKEEPER_LOOP``, proxy/run.py): uvloop by default, the stdlib loop
on request, and a start that never fails over the choice.

The real proxy in front of the real notes server, driven by the SDK client: an allowed read (the
fast path), a listing and a proposal (the SDK path) must work on every loop; the loop in use is
the one the proxy's log names.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from gatekeeper.home import Home
from tests.proxy_support import PY, REPO, rows, write_policy

pytestmark = pytest.mark.timeout(120)
UVLOOP = "uvloop.Loop"
ASYNCIO = "asyncio.unix_events._UnixSelectorEventLoop"


async def _session(tmp: Path, home: Home, env: dict[str, str]) -> str:
    """One proxy life on ``env``: its calls checked, its stderr returned."""
    policy = write_policy(tmp)
    (tmp / "workspace" / "notes" / "a.md").write_text("alpha")
    params = StdioServerParameters(
        command=PY,
        args=["-m", "gatekeeper", "proxy", "--policy", str(policy)],
        env={"GATEKEEPER_HOME": str(home.path), "PYTHONPATH": str(REPO), "GATEKEEPER_START_TIMEOUT": "20", **env},
        cwd=str(tmp),
    )
    stderr = tmp / "proxy-stderr.log"
    with open(stderr, "a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            read = await client.call_tool("read_note", {"path": "notes/a.md"})
            assert not read.is_error and "alpha" in read.content[0].text  # type: ignore[union-attr]
            listed = await client.call_tool("list_notes", {})
            assert not listed.is_error
            proposed = await client.call_tool("create_note", {"title": "Loop", "body": "b"})
            assert not proposed.is_error, proposed.content
    assert rows(home.db_path, "SELECT count(*) FROM proposal") == [(1,)]
    return stderr.read_text()


def _loop_in_log(home: Home) -> str:
    lines = [line for line in (home.log_dir / "proxy.log").read_text().splitlines() if "event loop: " in line]
    assert len(lines) == 1, lines
    return lines[0].split("event loop: ", 1)[1]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("asked", "loop", "warning"),
    [
        ("", UVLOOP, None),
        ("asyncio", ASYNCIO, None),
        ("UVloop", UVLOOP, None),
        ("tokio", ASYNCIO, "GATEKEEPER_LOOP=tokio is not one of uvloop, asyncio; using asyncio"),
    ],
)
async def test_the_loop_follows_gatekeeper_loop(
    tmp_path: Path, home: Home, asked: str, loop: str, warning: str | None
) -> None:
    stderr = await _session(tmp_path, home, {"GATEKEEPER_LOOP": asked} if asked else {})
    assert _loop_in_log(home) == loop
    if warning is None:
        assert "GATEKEEPER_LOOP" not in stderr
    else:
        assert warning in stderr


@pytest.mark.anyio
@pytest.mark.parametrize("asked", ["", "uvloop"])
async def test_without_uvloop_the_proxy_runs_on_asyncio(tmp_path: Path, home: Home, asked: str) -> None:
    """uvloop not importable (a package on the path that fails as a missing build would): the
    stdlib loop, a warning only if uvloop was asked for by name."""
    hidden = tmp_path / "no-uvloop" / "uvloop"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('uvloop hidden by the test')\n")
    env = {"PYTHONPATH": f"{hidden.parent}{os.pathsep}{REPO}"}
    stderr = await _session(tmp_path, home, {**env, "GATEKEEPER_LOOP": asked} if asked else env)
    assert _loop_in_log(home) == ASYNCIO
    assert ("uvloop hidden by the test" in stderr) == bool(asked)
    assert "uvloop hidden by the test" in (home.log_dir / "proxy.log").read_text()
