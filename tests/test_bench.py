"""`make bench` must keep working: its quick mode runs end to end and prints every figure."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.timeout(400)  # its subprocess may take 300 s
def test_bench_quick_runs_and_reports_every_figure(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--quick", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    for figure in (
        "1. proposals/s, 1 writer",
        "2. proposals/s, 4 writer processes",
        "3. Reader.proposals pending",
        "4. verify_chain",
    ):
        assert figure in result.stdout
    locked = re.search(r'"database is locked" errors\s+(\d+)', result.stdout)
    assert locked is not None and locked.group(1) == "0"
    intact = re.search(r"chain intact after concurrent writes\s+(\d+)", result.stdout)
    assert intact is not None and intact.group(1) == "1"
