"""What every benchmark shares: sizes, result rows, timing, percentiles and the printed table.

The bench modules (write_bench, audit_bench, commit_bench, proxy_bench, review_bench) import this
module and nothing imports them back, so each runs standalone or under bench/run.py without an
import cycle. Progress goes to stderr; stdout holds only the table.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from gatekeeper.canonical import format_ts, utc_now
from gatekeeper.home import Home, ensure_keys
from gatekeeper.store import migrate
from gatekeeper.store.store import ProposalDraft


@dataclass(frozen=True)
class Settings:
    """How hard to push: the full run measures against the targets, ``--quick`` only smoke-tests."""

    quick: bool
    write_seconds: float  # per single-writer run
    write_runs: int
    multi_seconds: float  # per 4-writer run
    multi_runs: int
    writers: int
    events: int  # size of the audit database for figures 3 and 4
    query_reps: int
    cli_reps: int
    verify_reps: int


FULL = Settings(False, 3.0, 3, 3.0, 3, 4, 1_000_000, 20, 5, 3)
QUICK = Settings(True, 0.5, 3, 1.0, 1, 4, 50_000, 20, 2, 3)


def fmt(value: float) -> str:
    """A figure's value with as many digits as its size deserves."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


@dataclass
class Figure:
    """One row of the result table. ``target`` None means the row is context, not a goal."""

    name: str
    value: float
    unit: str
    target: float | None = None
    cmp: str = ">="  # how value must compare with target: ">=", "<" or "=="
    note: str = ""

    @property
    def met(self) -> bool | None:
        """None for context rows; else whether the value meets the target."""
        if self.target is None:
            return None
        if self.cmp == ">=":
            return self.value >= self.target
        return self.value < self.target if self.cmp == "<" else self.value == self.target

    @property
    def shown(self) -> str:
        """The value as the table prints it (counts as integers)."""
        return str(self.value) if isinstance(self.value, int) else fmt(self.value)


@dataclass
class Report:
    """The rows and notes of one run, logged as they arrive so a long run shows progress."""

    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, figure: Figure) -> None:
        self.figures.append(figure)
        status = {None: "", True: "ok", False: "MISSED"}[figure.met]
        log(f"  {figure.name}: {figure.shown} {figure.unit} {status}")


def log(msg: str) -> None:
    """Progress goes to stderr so that stdout holds only the result table."""
    print(msg, file=sys.stderr, flush=True)


# -- timing ----------------------------------------------------------------------------------------


def median_time(fn: Callable[[], object], reps: int) -> float:
    """Median wall time of ``reps`` calls, in seconds (the median shrugs off one slow outlier)."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def interleaved(
    first: Callable[[], Awaitable[object]], second: Callable[[], Awaitable[object]], warmup: int, reps: int
) -> tuple[list[float], list[float]]:
    """Warm both up, then alternate timed calls (swapping who goes first each round) so drift hits
    both alike; the two lists of latencies in ms."""
    for _ in range(warmup):
        await first()
        await second()
    calls = (first, second)
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(reps):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            start = time.perf_counter()
            await calls[side]()
            times[side].append((time.perf_counter() - start) * 1000)
    return times


def spawn_writers(target: Callable[..., None], database: str, tag: str, s: Settings) -> list[dict[str, Any]]:
    """``s.writers`` spawned processes running ``target(database, tag+pK, seconds, barrier, results)``,
    released together by the barrier; each puts one dict on ``results`` (``{"crash": ...}`` on failure)."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(s.writers), ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(database, f"{tag}p{k}", s.multi_seconds, barrier, results))
        for k in range(s.writers)
    ]
    for p in procs:
        p.start()
    outs = [results.get(timeout=s.multi_seconds + 180) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    crashes = [o["crash"] for o in outs if "crash" in o]
    if crashes:
        raise RuntimeError(f"writer process crashed: {crashes}")
    return outs


def p50(xs: list[float]) -> float:
    """The median."""
    return statistics.median(xs)


def p99(xs: list[float]) -> float:
    """The 99th percentile (inclusive method); a single sample is its own p99."""
    return statistics.quantiles(xs, n=100, method="inclusive")[98] if len(xs) > 1 else xs[0]


# -- homes -----------------------------------------------------------------------------------------


def make_home(path: Path) -> Home:
    """A real migrated home, as ``gatekeeper init`` makes it (without its init event)."""
    home = Home(path)
    home.create()
    home.ensure_key()
    migrate.upgrade(home.db_path)
    ensure_keys(home)
    return home


def count_rows(db: Path, table: str) -> int:
    """Rows in ``table``, counted on a plain connection of the bench's own: a check, not a figure."""
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def draft(path: str, content: bytes, *, tool: str, workspace: str, ttl: timedelta, session: str) -> ProposalDraft:
    """A proposal from the bench's notes client: a text file at ``path``, expiring ``ttl`` from now."""
    return ProposalDraft(
        server="notes",
        tool=tool,
        arguments={"path": path, "content": content.decode("utf-8")},
        workspace=workspace,
        path=path,
        content=content,
        policy_digest="0" * 64,
        expires_at=format_ts(utc_now() + ttl),
        client_name="bench",
        client_version="1",
        protocol_version="2025-11-25",
        session_id=session,
    )


# -- output ----------------------------------------------------------------------------------------


def _row(f: Figure) -> tuple[str, str, str, str, str, str]:
    if f.target is None:
        return (f.name, f.shown, f.unit, "", "", "")
    op = {">=": "≥", "<": "<", "==": "="}[f.cmp]
    ratio = f"{f.value / f.target:.3g}" if f.target and f.cmp != "==" else ""
    return (f.name, f.shown, f.unit, f"{op} {f.target:,}", ratio, "ok" if f.met else "MISSED")


def print_table(report: Report, s: Settings, work: Path, total: float) -> None:
    """The result table, each figure's note, the report's notes and the verdict, on stdout."""
    rows = [("figure", "value", "unit", "target", "ratio", "status"), *map(_row, report.figures)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"Gatekeeper bench{' (--quick: small sizes, not comparable to the targets)' if s.quick else ''}")
    print(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, work folder {work}"
    )
    print()
    for k, row in enumerate(rows):
        print(
            "  ".join(
                c.rjust(w) if 0 < i < 5 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print()
    for f in report.figures:
        if f.note:
            print(f"  {f.name}: {f.note}")
    for note in report.notes:
        print(f"  {note}")
    missed = [f.name for f in report.figures if f.met is False]
    print()
    print(f"MISSED: {', '.join(missed)}" if missed else "All targets met.")
    print(f"Total bench time {total:.1f} s")


def standalone(prefix: str, quick: bool, figures: Callable[[bool, Path], list[Figure]]) -> int:
    """A bench module's own entry point: its figures in a temporary folder, printed as the table.
    Exit 1 only when the bench itself crashes (a missed target is a row, not a failure)."""
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            report = Report()
            for figure in figures(quick, Path(tmp)):
                report.add(figure)
            print_table(report, QUICK if quick else FULL, Path(tmp), time.perf_counter() - start)
    except Exception:
        traceback.print_exc()
        return 1
    return 0
