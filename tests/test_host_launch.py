"""The host-config entry, started exactly as a desktop host starts it, and the one resolver of
server commands that the proxy, `policy check` and `host-config` share."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gatekeeper.cli import cli
from gatekeeper.home import Home
from gatekeeper.policy.commands import INHERITED, child_env, resolve

REPO = Path(__file__).resolve().parent.parent
HOST_PATH = "/usr/bin:/bin"  # what Claude Desktop and friends give a server they launch


@pytest.fixture
def demo(tmp_path: Path, home: Home) -> Path:
    """The repository's own policy.yaml (`command: python`, the demo notes server) in a fresh folder."""
    folder = tmp_path / "demo"
    (folder / "workspace" / "notes").mkdir(parents=True)
    (folder / "workspace" / "notes" / "hello.md").write_text("# Hello\n\nfirst note\n")
    shutil.copy(REPO / "policy.yaml", folder / "policy.yaml")
    return folder / "policy.yaml"


def host_config(home: Home, policy: Path, code: int = 0) -> tuple[dict, str]:
    out = CliRunner().invoke(cli, ["--home", str(home.path), "host-config", "--policy", str(policy)])
    assert out.exit_code == code, (out.output, out.stderr)
    return (json.loads(out.stdout)["mcpServers"]["gatekeeper"] if code == 0 else {}), out.stderr


@pytest.mark.anyio
async def test_host_config_entry_works_as_a_desktop_host_launches_it(
    demo: Path, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import get_default_environment

    entry, _ = host_config(home, demo)
    assert Path(entry["command"]).is_absolute() and Path(entry["args"][-1]).is_absolute()
    assert set(entry["env"]) == {"GATEKEEPER_HOME", "PATH"}
    assert entry["env"]["PATH"].split(":")[0] == str(Path(sys.executable).absolute().parent)
    # A host gives the child the entry's env over HOME LOGNAME SHELL TERM USER and its own minimal
    # PATH; the SDK does exactly that from our environment, so ours gets the host's PATH.
    monkeypatch.setenv("PATH", HOST_PATH)
    launched = get_default_environment() | entry["env"]
    assert set(launched) <= {"HOME", "LOGNAME", "SHELL", "TERM", "USER", "PATH", "GATEKEEPER_HOME"}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"], cwd="/")
    async with Client(params) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"read_note", "list_notes", "create_note"} <= names, names
        result = await c.call_tool("read_note", {"path": "notes/hello.md"})
        assert not result.is_error, result.content
        assert "first note" in result.content[0].text  # type: ignore[union-attr]


def test_host_config_refuses_an_entry_whose_server_cannot_start(demo: Path, home: Home) -> None:
    demo.write_text(demo.read_text().replace("command: python ", "command: pythn  "))
    _, err = host_config(home, demo, code=1)
    assert "a host could not start every server" in err
    assert "servers.notes.command: server 'notes': command 'pythn' not found on PATH (" in err
    assert "Traceback" not in err


def test_the_inherited_variables_are_the_sdks() -> None:
    from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

    assert set(INHERITED) == set(DEFAULT_INHERITED_ENV_VARS)
    parent = {"PATH": "/p", "HOME": "/h", "SECRET": "x", "TERM": "() { evil; }"}
    assert child_env({"PATH": "/mine", "A": "1"}, parent) == {"PATH": "/mine", "HOME": "/h", "A": "1"}


# -- the resolver ----------------------------------------------------------------------------


def script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_bare_name_is_found_on_the_childs_path_not_ours(tmp_path: Path) -> None:
    tool = script(tmp_path / "bin" / "notes-server", "#!/bin/sh\nexit 0\n")
    found = resolve("notes-server", {"PATH": str(tmp_path / "bin")}, tmp_path, parent={"PATH": "/usr/bin:/bin"})
    assert found.ok and found.path == str(tool)
    # relative PATH entries count from the server's working folder, as for execvp in the child
    assert resolve("notes-server", {"PATH": "bin"}, tmp_path, parent={}).path == str(tool)
    missing = resolve("notes-server", {}, tmp_path, parent={"PATH": "/usr/bin:/bin"})
    assert missing.path is None
    assert missing.problem == (
        "command 'notes-server' not found on PATH (/usr/bin:/bin); use an absolute path or set PATH in the server's env"
    )


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: d / "nothing-here", "does not exist"),
        (lambda d: (d / "folder").mkdir() or d / "folder", "is a directory, not a program"),
        (lambda d: script(d / "plain", "#!/bin/sh\n", mode=0o644), "is not executable (chmod +x"),
        (lambda d: script(d / "orphan", "#!/no/such/interpreter\n"), "needs the #! interpreter /no/such/interpreter"),
        (lambda d: script(d / "envy", "#!/usr/bin/env -S no-such-runtime --flag\n"), "runs `env no-such-runtime`"),
    ],
)
def test_a_command_that_cannot_start_says_why(tmp_path: Path, make, expected: str) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path)
    found = resolve(str(path), {}, tmp_path, parent={"PATH": "/usr/bin:/bin"})
    assert found.path is None and expected in (found.problem or ""), found.problem


def test_a_bare_name_that_is_not_executable_is_named(tmp_path: Path) -> None:
    script(tmp_path / "bin" / "srv", "#!/bin/sh\n", mode=0o644)
    found = resolve("srv", {"PATH": str(tmp_path / "bin")}, tmp_path, parent={})
    assert found.path is None and f"({tmp_path / 'bin' / 'srv'} is not executable)" in (found.problem or "")


def test_a_working_script_with_env_shebang_resolves(tmp_path: Path) -> None:
    sh = shutil.which("sh")
    assert sh is not None
    tool = script(tmp_path / "srv", "#!/usr/bin/env sh\nexit 0\n")
    found = resolve(str(tool), {"PATH": os.path.dirname(sh)}, tmp_path, parent={})
    assert found.ok and found.path == str(tool)
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755
