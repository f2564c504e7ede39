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

README = (REPO / "README.md").read_text()


def test_readme_opens_with_the_two_commands() -> None:
    head = "\n".join(README.splitlines()[:8])
    assert "make demo" in head and "make test" in head


@pytest.mark.parametrize("path", [(), *[p for p, _ in commands(cli)]], ids=lambda p: " ".join(p) or "gatekeeper")
def test_every_command_help_is_in_the_readme(path: tuple[str, ...]) -> None:
    assert help_text(path) in README, "regenerate the README's CLI reference: python scripts/cli_reference.py"


def test_demo_runs_from_a_clean_environment(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
    }
    env.pop("GATEKEEPER_HOME", None)
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "Initialised Gatekeeper home" in result.stdout
    assert "create_note" in result.stdout and "propose" in result.stdout
    assert "OK: 1 events" in result.stdout
    assert list(tmp_path.iterdir()) == []  # the demo cleans up its temporary home
