"""Docs that cannot drift: every command's --help appears in the README, and the demo runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from cli_reference import commands, help_text  # noqa: E402

from gatekeeper.cli import cli  # noqa: E402
from tests.requirements import require_chromium  # noqa: E402

README = (REPO / "README.md").read_text()


def test_readme_opens_with_the_two_commands() -> None:
    head = "\n".join(README.splitlines()[:8])
    assert "make demo" in head and "make test" in head


@pytest.mark.parametrize("path", [(), *[p for p, _ in commands(cli)]], ids=lambda p: " ".join(p) or "gatekeeper")
def test_every_command_help_is_in_the_readme(path: tuple[str, ...]) -> None:
    assert help_text(path) in README, "regenerate the README's CLI reference: python scripts/cli_reference.py"


@pytest.mark.slow
@pytest.mark.timeout(400)  # its subprocess may take 300 s
def test_demo_check_walks_the_whole_tour(tmp_path: Path) -> None:
    """`make demo-check`: the tour with Chromium approving, from nothing to an approved note on disk."""
    require_chromium()
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
