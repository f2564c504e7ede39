"""Figures 3 and 4 on the synthetic database (bench/bigdb.py): audit queries and chain verification,
in-process and through the ``gatekeeper`` CLI as a subprocess (start-up shown beside them for scale).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from bigdb import BigDb, load_or_build
from harness import Figure, Report, Settings, log, median_time

from gatekeeper.audit.verify import verify_chain
from gatekeeper.home import ENV_HOME, Home
from gatekeeper.store.queries import Reader


def big_db(work: Path, s: Settings, report: Report) -> BigDb:
    """The database of ``s.events`` events (built, or reused from ``--workdir``) and its build figure."""
    db = load_or_build(work / f"big-{s.events}", s.events)
    size_mb = db.home.db_path.stat().st_size / 1e6
    report.add(
        Figure(
            f"3. build {db.events:,}-event database",
            db.build_seconds,
            "s",
            note=f"{db.proposals:,} proposals, {db.pending:,} pending, {size_mb:,.0f} MB"
            + (" (reused from --workdir)" if db.reused else ""),
        )
    )
    return db


def cli_command() -> list[str]:
    exe = Path(sys.executable).with_name("gatekeeper")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "gatekeeper"]


def run_cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ENV_HOME: str(home.path)}
    done = subprocess.run([*cli_command(), *args], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"gatekeeper {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def audit_queries(db: BigDb, s: Settings, report: Report) -> None:
    log(f"[3] audit proposals: in-process median of {s.query_reps}, CLI median of {s.cli_reps}")
    size = f"{db.events // 1000:,}k"
    with Reader(db.home.db_path) as reader:
        for status, target in (("pending", 100), ("committed", None), (None, None)):
            label = status or "(no status)"
            rows = reader.proposals(status=status, limit=50)
            if status == "pending" and (len(rows) != min(50, db.pending) or {r.status for r in rows} != {"pending"}):
                statuses = sorted({r.status for r in rows})
                raise RuntimeError(f"pending query returned {len(rows)} rows, statuses {statuses}")
            query = partial(reader.proposals, status=status, limit=50)
            secs = median_time(query, s.query_reps)
            fig = Figure(
                f"3. Reader.proposals {label}, {size} events",
                secs * 1000,
                "ms",
                target,
                "<",
            )
            report.add(fig)
            # The plans explain the numbers, met or not.
            plan = reader.query_plan(query)
            report.notes.append(f"query plan, {label}: " + " | ".join(plan))
    for status in ("pending", "committed", None):
        args = ["audit", "proposals", "--json"] + (["--status", status] if status else [])
        secs = median_time(partial(run_cli, db.home, *args), s.cli_reps)
        report.add(
            Figure(
                f"3. CLI audit proposals {status or '(no status)'}",
                secs * 1000,
                "ms",
                note="subprocess wall time, includes Python start-up",
            )
        )
    secs = median_time(lambda: run_cli(db.home, "--version"), s.cli_reps)
    report.add(Figure("3. CLI gatekeeper --version", secs * 1000, "ms", note="start-up alone, for scale"))


def audit_verify(db: BigDb, s: Settings, report: Report) -> None:
    log(f"[4] verify_chain: median of {s.verify_reps}, then the CLI once")
    rates = []
    for _ in range(s.verify_reps):
        with Reader(db.home.db_path) as reader:
            start = time.perf_counter()
            chain = verify_chain(reader)
            elapsed = time.perf_counter() - start
        if not chain.ok or chain.count != db.events:
            raise RuntimeError(f"the built chain does not verify: {chain}")
        rates.append(chain.count / elapsed)
    report.add(
        Figure(
            f"4. verify_chain, {db.events // 1000:,}k events",
            statistics.median(rates),
            "events/s",
            200_000,
            note="runs: " + ", ".join(f"{r:,.0f}" for r in rates),
        )
    )
    start = time.perf_counter()
    out = run_cli(db.home, "audit", "verify")
    secs = time.perf_counter() - start
    if not out.stdout.startswith("OK"):
        raise RuntimeError(f"audit verify said: {out.stdout.strip()}")
    report.add(Figure("4. CLI audit verify (wall)", secs, "s", note=f"{db.events / secs:,.0f} events/s incl. start-up"))
