"""bench/bigdb.py writes what today's store writes: the figures on its synthetic database mean
something only if its decisions and reviewer rows are signed as the review page signs them
(Ed25519), so the real ``audit verify --approvals`` and a log-in lookup accept every one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from gatekeeper.cli import cli
from gatekeeper.home import Home
from gatekeeper.store.signed_rows import REVIEWER_COLUMNS, reviewer_problem
from gatekeeper.store.store import Store

REPO = Path(__file__).resolve().parent.parent
BUILD = (
    "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
    "from bigdb import build_big_db; build_big_db(Path(sys.argv[2]), 2000)"
)


def test_the_synthetic_database_holds_ed25519_decisions_and_signed_reviewers(tmp_path: Path) -> None:
    home = Home(tmp_path / "big")
    built = subprocess.run(
        [sys.executable, "-c", BUILD, str(REPO / "bench"), str(home.path)], capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr
    args = ["--home", str(home.path), "audit", "verify", "--approvals", "--policy", str(REPO / "policy.yaml")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    checked = int(result.output.splitlines()[-1].split()[1])
    assert checked > 300 and "0 problem(s)" in result.output  # every approved decision verifies
    with Store(home.db_path) as store, store.transaction() as tx:
        rows = tx.all(f"SELECT {REVIEWER_COLUMNS} FROM reviewer")
        assert len(rows) == 3 and [reviewer_problem(tx.first, store.keyring(), r) for r in rows] == [None] * 3
