"""A missing browser or peer skips loudly on a developer's machine and fails under CI=true.

Every check here uses a missing path or a broken install on purpose: that is the thing under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NEEDS_MISSING = """
from tests.requirements import require_chromium


def test_needs_a_browser() -> None:
    require_chromium("/nonexistent/chromium")
"""


def run_inner_pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_inner.py").write_text(NEEDS_MISSING)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-rsf", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "test_inner.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.timeout(150)
def test_missing_browser_fails_under_ci(tmp_path: Path) -> None:
    result = run_inner_pytest(tmp_path, "true")
    assert result.returncode == 1, result.stdout
    assert "1 failed" in result.stdout
    assert "CI=true and Chromium (/nonexistent/chromium) is missing" in result.stdout
    assert "make browser" in result.stdout


@pytest.mark.timeout(150)
@pytest.mark.parametrize("ci", [None, "", "false"])
def test_missing_browser_skips_loudly_elsewhere(tmp_path: Path, ci: str | None) -> None:
    result = run_inner_pytest(tmp_path, ci)
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
    assert "SKIPPED LOUDLY: Chromium (/nonexistent/chromium) is missing" in result.stdout
    assert "under CI=true this test fails" in result.stdout


def _peers(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    not_a_folder = tmp_path / "cache-is-a-file"
    not_a_folder.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["GATEKEEPER_PEERS_CACHE"] = str(not_a_folder)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "install_peers.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_install_peers_fails_under_ci_when_a_peer_cannot_be_installed(tmp_path: Path) -> None:
    result = _peers(tmp_path, "true")
    assert result.returncode == 1, result.stderr
    assert "ERROR: CI=true needs every interop peer; missing: filesystem server, mcp-server-git" in result.stderr
    assert "obsidian-mcp" in result.stderr.split("missing:", 1)[1].splitlines()[0]
    assert "Traceback" not in result.stderr


def test_install_peers_warns_and_goes_on_outside_ci(tmp_path: Path) -> None:
    result = _peers(tmp_path, None)
    assert result.returncode == 0, result.stderr
    assert "WARNING: filesystem server unavailable, its interop tests will be skipped" in result.stderr
    assert "Traceback" not in result.stderr


def _make_browser(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    """`make browser` with a PATH holding neither chromium nor apt-get: the install cannot succeed."""
    make = shutil.which("make")
    assert make is not None
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": str(tmp_path)}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([make, "-s", "-C", str(REPO), "browser"], env=env, capture_output=True, text=True, timeout=60)


def test_make_browser_fails_under_ci_when_chromium_cannot_be_installed(tmp_path: Path) -> None:
    result = _make_browser(tmp_path, "true")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "ERROR: could not install chromium" in result.stderr


def test_make_browser_only_warns_outside_ci(tmp_path: Path) -> None:
    result = _make_browser(tmp_path, None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING: could not install chromium; browser tests will be skipped" in result.stdout


HANGS = """
import threading


def test_hangs() -> None:
    threading.Event().wait()  # a hang on purpose: the thing under test
"""


@pytest.mark.timeout(120)
def test_a_hanging_test_fails_fast_with_the_project_settings(tmp_path: Path) -> None:
    """pytest-timeout is installed and configured: with the project's ini, a hang fails its test."""
    (tmp_path / "test_hang.py").write_text(HANGS)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path)),
            *("-p", "no:cacheprovider", "-o", "timeout=2", str(tmp_path / "test_hang.py")),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    assert "Failed: Timeout" in result.stdout and "1 failed" in result.stdout, result.stdout[-2000:]


def test_the_default_timeout_is_set(pytestconfig: pytest.Config) -> None:
    assert float(pytestconfig.getini("timeout")) == 300
    assert pytestconfig.getini("timeout_method") == "signal"
