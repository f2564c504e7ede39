"""Gatekeeper benchmarks: durable write throughput, audit query latency and chain verification speed.

Everything runs against databases built here, in a temporary folder (never a user's home), so the
figures are repeatable. Targets that are not met are printed as MISSED; the exit status is 1 only
when the benchmark itself crashes. See bench/README.md for what each figure means.

    .venv/bin/python bench/run.py [--quick] [--workdir DIR]

This file is only the entry point: the shared harness is bench/harness.py, the synthetic database
bench/bigdb.py, and each group of figures a module of its own that this one runs in order.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import approve_bench  # A1
import audit_bench  # figures 3 and 4
import change_bench  # E1
import commit_bench  # figures 5 and 6
import fastpath_bench  # F1-F4
import http_bench  # H1
import proxy_bench  # P1-P3
import review_bench  # R0-R2
import team_bench  # T1-T4
import urlcall_bench  # H2
import write_bench  # figures 1 and 2
from harness import FULL, QUICK, Figure, Report, Settings, log, print_table


def run_all(work: Path, s: Settings, report: Report) -> None:
    """Every figure, in the table's order."""
    write_bench.single_writer(work, s, report)
    write_bench.many_writers(work, s, report)
    db = audit_bench.big_db(work, s, report)
    audit_bench.audit_queries(db, s, report)
    audit_bench.audit_verify(db, s, report)
    for row in commit_bench.figures(work, quick=s.quick, log=log):
        report.add(Figure(**row))
    if not s.quick:  # the smoke sizes of the team rows have a test of their own (team_bench.py --smoke)
        for figure in team_bench.run(s.quick, work):  # after figure 3: T4 copies its database
            report.add(figure)
    for figure in [*proxy_bench.run(s.quick, work), *review_bench.run(s.quick, work), *change_bench.run(s.quick, work)]:
        report.add(figure)
    for figure in fastpath_bench.run(s.quick, work):
        report.add(figure)
    for figure in http_bench.run(s.quick, work):
        report.add(figure)
    for figure in urlcall_bench.run(s.quick, work):
        report.add(figure)
    for figure in approve_bench.run(s.quick, work):
        report.add(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, < 30 s: a smoke test")
    parser.add_argument("--workdir", type=Path, help="keep databases here (reused next time) instead of a temp folder")
    args = parser.parse_args(argv)
    s = QUICK if args.quick else FULL
    start = time.perf_counter()
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if args.workdir:
        work = args.workdir.absolute()
        work.mkdir(parents=True, exist_ok=True)
        for name in ("w1", "w4"):  # the write figures always start from an empty database
            shutil.rmtree(work / name, ignore_errors=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="gatekeeper-bench-")
        work = Path(tmp.name)
    try:
        report = Report()
        run_all(work, s, report)
        print_table(report, s, work, time.perf_counter() - start)
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
