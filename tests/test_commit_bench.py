"""The committer's benchmark must keep working: its quick mode runs and prints figures 5 and 6."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.smoke
@pytest.mark.timeout(400)  # its subprocess may take 300 s
def test_commit_bench_quick_runs_and_reports_its_figures(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "commit_bench.py"), "--quick", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rate = re.search(r"5\. files committed/s, 4 KiB, full fsync: ([\d,.]+) /s", result.stdout)
    p50 = re.search(r"6\. commit --watch approval-to-file p50: ([\d,.]+) ms", result.stdout)
    replaces = re.search(r"5r\. replaces committed/s, 4 KiB, full fsync: ([\d,.]+) /s", result.stdout)
    assert rate and p50 and replaces and "p99" in result.stdout, result.stdout
    assert float(replaces.group(1).replace(",", "")) > 0
    assert float(rate.group(1).replace(",", "")) > 0 and float(p50.group(1).replace(",", "")) > 0
