"""`make bench` must keep working: its quick mode runs end to end and prints every figure."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.process_support import run_in_group

REPO = Path(__file__).resolve().parent.parent


STALL = 300.0
"""Seconds the quick bench may go without printing a line before it counts as stuck (it logs each step)."""
LAST_RESORT = 1800.0
"""Seconds it may take in all: on a loaded machine it is slower, not stuck; the test's own timeout is above."""


@pytest.mark.slow
@pytest.mark.smoke
@pytest.mark.timeout(LAST_RESORT + 120)
def test_bench_quick_runs_and_reports_every_figure(tmp_path: Path) -> None:
    """The bench runs as a process group of its own: the review servers and proxies it starts are ended
    with it, even when the bench itself was killed before it could stop them."""
    argv = [sys.executable, str(REPO / "bench" / "run.py"), "--quick", "--workdir", str(tmp_path / "work")]
    result = run_in_group(argv, tmp_path / "logs", stall=STALL, cap=LAST_RESORT)
    assert result.returncode == 0, result.stderr
    for figure in (
        "1. proposals/s, 1 writer",
        "2. proposals/s, 4 writer processes",
        "3. Reader.proposals pending",
        "4. verify_chain",
        "E1. edit proposals/s incl. diff",
        "F1. notes raw gatekeeper ratio p50",
        "F2. notes cold gatekeeper tools/list",
        "F3. notes gatekeeper RSS after calls",
        "H1. vault sdk direct p50",
        "H2. plain gatekeeper ratio p50",
        "H2. sdk gatekeeper proxy CPU per call",
        "A1. approve with passkey p50",
    ):
        assert figure in result.stdout
    locked = re.search(r'"database is locked" errors\s+(\d+)', result.stdout)
    assert locked is not None and locked.group(1) == "0"
    intact = re.search(r"chain intact after concurrent writes\s+(\d+)", result.stdout)
    assert intact is not None and intact.group(1) == "1"


def _bench_imports(path: Path, names: set[str]) -> set[str]:
    """The bench modules that ``path`` imports (bench/ is on sys.path when a bench runs)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found & names


def test_bench_modules_import_the_harness_not_each_other() -> None:
    """No import cycle: only run.py (the entry point) imports the benches; they import the harness
    (and audit_bench the database builder); the harness imports no bench."""
    modules = {p.stem: p for p in (REPO / "bench").glob("*.py")}
    graph = {name: _bench_imports(path, set(modules) - {name}) for name, path in modules.items()}
    assert graph["harness"] == set()
    assert graph["bigdb"] == {"harness"}
    assert graph["fastpath_setup"] == {"harness"}
    assert graph["teamdb"] == {"harness"}
    for name, imported in graph.items():
        if name != "run":
            # fastpath_bench's launchers and raw client live beside it (a module stays under 400 lines)
            # (team_bench's PostgreSQL cluster, homes and fill live in teamdb, for the same reason)
            extra = {
                "fastpath_bench": {"fastpath_setup", "fastpath_profile"},
                "fastpath_profile": {"fastpath_setup"},
                # the per-call tools drive the same launchers and raw client as the fast-path bench
                "percall_ab": {"fastpath_setup"},
                "percall_instr": {"fastpath_setup"},
                # the url-call bench drives its proxies with the fast-path bench's raw line client
                "urlcall_bench": {"fastpath_setup"},
                "team_bench": {"teamdb"},
            }.get(name, set())
            assert imported <= {"harness", "bigdb"} | extra, f"bench/{name}.py imports {sorted(imported)}"
    benches = {
        "write_bench",
        "audit_bench",
        "commit_bench",
        "proxy_bench",
        "review_bench",
        "fastpath_bench",
        "http_bench",
        "urlcall_bench",
        "approve_bench",
        "team_bench",
    }
    assert graph["run"] >= benches


def test_a_variant_that_stops_answering_fails_the_bench_instead_of_hanging_it(tmp_path: Path) -> None:
    """The raw client's watchdog kills a process that swallows a request, and says so."""
    script = (
        "import sys, time\n"
        "sys.path.insert(0, 'bench')\n"
        "import fastpath_setup as s\n"
        "s.ANSWER_WITHIN = 1.0\n"
        "mute = s.Launch([sys.executable, '-c', 'import time; time.sleep(60)'], {})\n"
        "client = s.RawClient(mute, sys.stderr)\n"
        "started = time.monotonic()\n"
        "try:\n"
        "    client.request('initialize', {})\n"
        "except RuntimeError as e:\n"
        "    print(f'{time.monotonic() - started:.1f}', e)\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=30)
    waited, _, message = done.stdout.strip().partition(" ")
    assert message == "initialize: no answer within 1 s; the process was killed", done.stdout + done.stderr
    assert float(waited) < 10
