"""bench/team_bench.py (team mode's figures) keeps running: its --smoke sizes end to end, both backends."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.requirements import missing

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.smoke
@pytest.mark.timeout(200)
def test_team_bench_smoke_measures_both_backends(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "team_bench.py"), "--smoke", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    if "T. team rows: skipped" in result.stdout:
        missing("PostgreSQL", "`make postgres` installs it")

    def value(name: str) -> float:
        found = re.search(re.escape(name) + r"\s+([\d.,]+)", result.stdout)
        assert found is not None, f"no row {name!r} in:\n{result.stdout}"
        return float(found.group(1).replace(",", ""))

    for backend in ("SQLite (WAL, FULL sync)", "PostgreSQL (fsync on)"):
        assert value(f"T1. proposals/s, 1 writer, {backend}") > 0
        assert value(f"T2. proposals/s, 2 writer processes, {backend}") > 0
        assert value(f"T3. files committed/s, 4 KiB, full fsync, {backend}") > 0
    assert value("T2. errors, 2 writers, both backends") == 0
    assert value("T2. chain intact, sqlite") == value("T2. chain intact, postgresql") == 1
    for backend in ("sqlite", "postgresql"):
        assert value(f"T4. Reader.proposals pending, 5k events, {backend}") > 0
    assert "plan: Limit" in result.stdout  # the PostgreSQL plan, read back from auto_explain
