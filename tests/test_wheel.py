"""A wheel built from a clean copy of the repo, installed alone in a fresh venv (not editable),
carries templates/ and migrations/ and runs `gatekeeper init` and `gatekeeper db upgrade`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _clean_copy(dest: Path) -> Path:
    """Only the files git tracks (plus any not yet committed edits to them): what a fresh clone has."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.mark.slow
@pytest.mark.smoke
@pytest.mark.timeout(1200)  # build (300 s) + venv + pip install (600 s) + runs
def test_wheel_installs_alone_and_runs(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is needed to know which files a clean clone holds")
    src = _clean_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(src)],
        check=True,
        timeout=300,
    )
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "gatekeeper/migrations/env.py" in names
    assert "gatekeeper/migrations/versions/0001_initial.py" in names
    assert any(n.startswith("gatekeeper/templates/") for n in names)
    assert not any(n.startswith("tests/") for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], check=True, timeout=600)

    outside = tmp_path / "elsewhere"  # run away from the source tree, so nothing is found by accident
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["GATEKEEPER_HOME"] = str(tmp_path / "home")
    gatekeeper = venv / "bin" / "gatekeeper"

    def run(*args: str) -> str:
        result = subprocess.run(
            [str(gatekeeper), *args], cwd=outside, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    where = subprocess.run(
        [
            str(py),
            "-c",
            "import gatekeeper.resources as r; print(r.migrations_dir()); print(r.templates_dir())",
        ],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    site = str(venv / "lib")
    assert all(p.startswith(site) for p in where), where  # from the installed package, not the repo
    assert "Initialised" in run("init")
    assert "nothing to do" in run("db", "upgrade")
    assert "up to date" in run("db", "status")
    assert run("audit", "verify").startswith("OK: 1 events")
    version = subprocess.run(
        [str(py), "-m", "gatekeeper", "--version"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "gatekeeper" in version
