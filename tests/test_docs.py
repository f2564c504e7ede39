"""Docs that cannot drift: the README's CLI reference is every command's --help (cog), and the demo runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.requirements import require_chromium

REPO = Path(__file__).resolve().parent.parent

README = (REPO / "README.md").read_text()


def test_readme_opens_with_the_two_commands() -> None:
    head = "\n".join(README.splitlines()[:8])
    assert "make demo" in head and "make test" in head


def cog_check(readme: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", str(readme)], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_the_readme_cli_reference_is_what_the_commands_print() -> None:
    """``cog --check``: the section is regenerated from the commands and compared whole."""
    done = cog_check(REPO / "README.md")
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\nregenerate it: cog -r README.md"


def test_the_check_notices_a_command_that_is_gone(tmp_path: Path) -> None:
    """Help for a command that no longer exists (or an edited help) must fail, not pass as a substring."""
    stale = "```text\n$ gatekeeper frobnicate --help\nUsage: gatekeeper frobnicate [OPTIONS]\n```\n"
    readme = tmp_path / "README.md"
    readme.write_text(README.replace("<!-- [[[end]]] -->", stale + "<!-- [[[end]]] -->"))
    done = cog_check(readme)
    assert done.returncode != 0 and "Check failed" in done.stderr and "(changed)" in done.stdout


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary folder with a short path: Chromium puts its sockets under TMPDIR, and a Unix
    socket path has ~108 bytes, which pytest's own folders pass once their counter has 4 digits."""
    folder = Path(tempfile.mkdtemp(prefix="gk-tour-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(400)  # its subprocess may take 300 s
def test_demo_check_walks_the_whole_tour(short_tmp: Path) -> None:
    """`make demo-check`: the tour with Chromium approving, from nothing to an approved note on disk."""
    require_chromium()
    tmp_path = short_tmp
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("GATEKEEPER_HOME", None)
    result = subprocess.run(
        [sys.executable, "-m", "gatekeeper.demo.tour", "--headless"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "browser: Decision: approved by demo" in out
    assert "committed" in out and "# Ideas from the agent" in out
    assert "OK: 1 committed file(s) checked, 0 problem(s)" in out
    assert list(tmp_path.iterdir()) == []  # the tour cleans up its temporary folder
