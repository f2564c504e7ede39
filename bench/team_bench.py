"""Team mode (issue 15): the store on PostgreSQL beside SQLite, measured in the same run, interleaved.

    .venv/bin/python bench/team_bench.py [--quick | --smoke] [--workdir DIR]

T1. durable proposals/s, 1 writer: ``Store.propose`` of small files, back to back, each backend's
    runs alternating (who goes first swaps each run).
T2. the same with 4 spawned writer processes on one database; errors counted, the chain verified.
T3. commits/s: N approved 4 KiB proposals, one pass of the real committer (``commit.run.session``,
    what ``gatekeeper commit`` opens; built here from Store/Reader where that refuses PostgreSQL).
T4. ``audit proposals --status pending`` at 1,000,000 events: the SQLite history of figure 3
    (bench/bigdb.py) copied into PostgreSQL with COPY, then ``Reader.proposals`` timed on both,
    alternating; the CLI once per backend for context; the PostgreSQL plan from auto_explain.

PostgreSQL is a throwaway cluster on a Unix socket (scripts/postgres.py, ``make postgres``) with
its durable defaults: fsync on, full_page_writes on, synchronous_commit on. SQLite: WAL, FULL sync.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from bigdb import BigDb, load_or_build
from harness import FULL, QUICK, Figure, Report, Settings, draft, log, make_home, print_table, spawn_writers
from teamdb import COMMIT_FILES, PgServer, approved_bed, copy_history, pg_home

from gatekeeper.audit.verify import verify_chain
from gatekeeper.errors import GatekeeperError
from gatekeeper.home import ENV_HOME, Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import ENV_DATABASE_URL, Database, as_url, parse_database_url

# Smaller than --quick: the test suite's smoke test of this script (a few seconds of work).
SMOKE = Settings(True, 0.2, 1, 0.3, 1, 2, 5_000, 3, 1, 1)
# bench/run.py --quick (a smoke test too): as short, 4 writers, on figure 3's --quick database.
QUICK_TEAM = dataclasses.replace(SMOKE, writers=4, events=QUICK.events)
BACKENDS = ("sqlite", "postgresql")
LABEL = {"sqlite": "SQLite (WAL, FULL sync)", "postgresql": "PostgreSQL (fsync on)"}


def order(run: int) -> tuple[str, ...]:
    """Both backends each run, the one going first swapped every run so drift hits both alike."""
    return BACKENDS if run % 2 == 0 else BACKENDS[::-1]


def rate_rows(prefix: str, rates: dict[str, list[float]], unit: str = "/s", note: str = "") -> list[Figure]:
    """One row per backend (median of its runs, every run in the note) and PostgreSQL ÷ SQLite."""
    rows = [
        Figure(
            f"{prefix}, {LABEL[b]}",
            statistics.median(rates[b]),
            unit,
            note="runs: " + ", ".join(f"{r:,.0f}" for r in rates[b]) + (f"; {note}" if note else ""),
        )
        for b in BACKENDS
    ]
    ratios = [pg / sq for pg, sq in zip(rates["postgresql"], rates["sqlite"], strict=True)]
    rows.append(
        Figure(
            f"{prefix}, PostgreSQL ÷ SQLite",
            statistics.median(ratios),
            "x",
            note="per run (same run, interleaved): " + ", ".join(f"{r:.2f}" for r in ratios),
        )
    )
    return rows


# -- T1, T2: durable proposals ---------------------------------------------------------------------


def propose_for(store: Store, tag: str, seconds: float) -> tuple[int, float]:
    """``Store.propose`` of distinct small drafts back to back for ``seconds``: (proposals, elapsed)."""
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        propose_one(store, tag, count)
        count += 1
    return count, time.perf_counter() - start


def propose_one(store: Store, tag: str, i: int) -> None:
    """A distinct small draft: a retry lookup never matches, so every call inserts a proposal."""
    content = f"# note {i}\n\nwritten by {tag}\n".encode()
    store.propose(
        draft(
            f"team/{tag}/{i}.md", content, tool="create_note", workspace="/tmp/w", ttl=timedelta(hours=1), session=tag
        )
    )


def single_writer(dbs: dict[str, Database], s: Settings) -> list[Figure]:
    log(f"[T1] 1 writer, both backends: {s.write_runs} runs of {s.write_seconds:g} s each, alternating")
    rates: dict[str, list[float]] = {b: [] for b in BACKENDS}
    stores = {b: Store(dbs[b]) for b in BACKENDS}
    try:
        for run in range(s.write_runs):
            for b in order(run):
                count, elapsed = propose_for(stores[b], f"r{run}", s.write_seconds)
                rates[b].append(count / elapsed)
    finally:
        for store in stores.values():
            store.close()
    return rate_rows("T1. proposals/s, 1 writer", rates, note="one transaction per proposal: row + chained event")


def writer_process(url: str, tag: str, seconds: float, barrier: Any, results: Any) -> None:
    """One spawned writer: its own Store on the database ``url`` names, released at the barrier."""
    try:
        store = Store(parse_database_url(url, "the bench's database"))
        barrier.wait(timeout=120)
        ok, errors, messages = 0, 0, []
        start = time.perf_counter()
        deadline = start + seconds
        i = 0
        while time.perf_counter() < deadline:
            try:
                propose_one(store, tag, i)
                ok += 1
            except Exception as exc:  # counted, not fatal: the figure is how many fail
                errors += 1
                if len(messages) < 3:
                    messages.append(f"{type(exc).__name__}: {exc}")
            i += 1
        elapsed = time.perf_counter() - start
        store.close()
        results.put({"ok": ok, "errors": errors, "messages": messages, "elapsed": elapsed})
    except BaseException as exc:
        results.put({"crash": f"{type(exc).__name__}: {exc}"})


def writer_run(db: Database, s: Settings, tag: str) -> list[dict[str, Any]]:
    return spawn_writers(writer_process, as_url(db), tag, s)


def many_writers(dbs: dict[str, Database], s: Settings) -> list[Figure]:
    n = s.writers
    log(f"[T2] {n} writer processes, both backends: {s.multi_runs} run(s) of {s.multi_seconds:g} s, alternating")
    rates: dict[str, list[float]] = {b: [] for b in BACKENDS}
    errors: dict[str, int] = dict.fromkeys(BACKENDS, 0)
    made: dict[str, int] = dict.fromkeys(BACKENDS, 0)
    messages: list[str] = []
    for run in range(s.multi_runs):
        for b in order(run):
            outs = writer_run(dbs[b], s, f"{b[:2]}{run}")
            rates[b].append(sum(o["ok"] for o in outs) / max(o["elapsed"] for o in outs))
            made[b] += sum(o["ok"] for o in outs)
            errors[b] += sum(o["errors"] for o in outs)
            messages += [f"{b}: {m}" for o in outs for m in o["messages"]]
    rows = rate_rows(f"T2. proposals/s, {n} writer processes", rates)
    rows.append(
        Figure(f"T2. errors, {n} writers, both backends", sum(errors.values()), "", 0, "==", "; ".join(messages[:3]))
    )
    for b in BACKENDS:
        with Reader(dbs[b]) as reader:
            chain = verify_chain(reader)
        intact = chain.ok and chain.count == made[b]
        note = f"verify ok={chain.ok}, {chain.count} events, {made[b]} proposals made" + (
            f", problem: {chain.problem}" if chain.problem else ""
        )
        rows.append(Figure(f"T2. chain intact, {b}", int(intact), "(1 = yes)", 1, "==", note=note))
    return rows


# -- T3: commits ------------------------------------------------------------------------------------


def commit_rows(work: Path, pg: PgServer, s: Settings) -> list[Figure]:
    n, runs = (20, 1) if s.quick else (1_000, 3)
    log(f"[T3] committer, both backends: {runs} passes of {n} approved 4 KiB files (batch 64), alternating")
    rates: dict[str, list[float]] = {b: [] for b in BACKENDS}
    how: set[str] = set()
    for run in range(runs):
        for b in order(run):
            db = pg.new_database(f"commit_{run}") if b == "postgresql" else None
            rate, opened = approved_bed(work / f"team-commit-{b}-{run}", db, n).commit_rate()
            rates[b].append(rate)
            how.add(f"{b}: {opened}")
    return rate_rows(
        f"T3. files committed/s, {COMMIT_FILES}", rates, note=f"{n} files a pass, batch 64; " + "; ".join(sorted(how))
    )


# -- T4: audit proposals at 1,000,000 events ---------------------------------------------------------


def audit_rows(work: Path, pg: PgServer, s: Settings) -> list[Figure]:
    big = load_or_build(work / f"big-{s.events}", s.events)
    url = pg.new_database("big")
    log(f"[T4] copying the {big.events:,}-event history into PostgreSQL (COPY) ...")
    fill = copy_history(big.home.db_path, url)
    home = pg_home(work / "team-big-pg", url)
    size = f"{big.events // 1000:,}k events"
    rows = [Figure(f"T4. fill PostgreSQL, {size}", fill.seconds, "s", note=fill.note)]
    dbs: dict[str, Database] = {"sqlite": big.home.db_path, "postgresql": url}
    times = timed_pending(dbs, big, s.query_reps)
    for b in BACKENDS:
        rows.append(
            Figure(
                f"T4. Reader.proposals pending, {size}, {b}",
                statistics.median(times[b]),
                "ms",
                100,
                "<",
                note=f"p50 of {s.query_reps}, alternating with the other backend; max {max(times[b]):.1f} ms",
            )
        )
    for status in ("committed", None):
        with Reader(url) as reader:
            secs = statistics.median(timed(partial(reader.proposals, status=status, limit=50), s.query_reps))
        rows.append(Figure(f"T4. Reader.proposals {status or '(no status)'}, {size}, postgresql", secs, "ms"))
    for b, h in (("sqlite", big.home), ("postgresql", home)):
        rows.append(cli_row(b, h, s.cli_reps))
    plan = pg.plan("big", partial(pending_once, url))
    rows[2] = dataclasses.replace(rows[2], note=f"{rows[2].note}; plan: {plan}")  # the PostgreSQL pending row
    return rows


def pending_once(db: Database) -> None:
    with Reader(db) as reader:
        reader.proposals(status="pending", limit=50)


def timed(call: Callable[[], object], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def timed_pending(dbs: dict[str, Database], big: BigDb, reps: int) -> dict[str, list[float]]:
    """``proposals(status="pending", limit=50)`` on both, alternating; each answer checked first."""
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    readers = {b: Reader(dbs[b]) for b in BACKENDS}
    try:
        answers = {b: readers[b].proposals(status="pending", limit=50) for b in BACKENDS}
        for b, rows in answers.items():
            if len(rows) != min(50, big.pending) or {r.status for r in rows} != {"pending"}:
                raise RuntimeError(
                    f"{b}: the pending query returned {len(rows)} rows: {sorted({r.status for r in rows})}"
                )
        if [r.id for r in answers["sqlite"]] != [r.id for r in answers["postgresql"]]:
            raise RuntimeError("the two backends list different pending proposals")
        for run in range(reps):
            for b in order(run):
                times[b] += timed(partial(readers[b].proposals, status="pending", limit=50), 1)
    finally:
        for reader in readers.values():
            reader.close()
    return times


def cli_row(backend: str, home: Home, reps: int) -> Figure:
    """``gatekeeper audit proposals --status pending --json`` as a subprocess (start-up included)."""
    exe = Path(sys.executable).with_name("gatekeeper")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "gatekeeper"]
    cmd += ["audit", "proposals", "--status", "pending", "--json"]
    env = {**os.environ, ENV_HOME: str(home.path)}
    env.pop(ENV_DATABASE_URL, None)  # the home's own database_url file names the database
    name = f"T4. CLI audit proposals --status pending, {backend}"
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        times.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0:
            why = " ".join(line.strip() for line in done.stderr.strip().splitlines()) or "no message"
            return Figure(f"{name}: skipped", 0, "", note=f"exit {done.returncode}: {why}")
    return Figure(name, statistics.median(times), "ms", note=f"subprocess wall time incl. start-up, p50 of {reps}")


# -- the run ------------------------------------------------------------------------------------------


def write_databases(work: Path, pg: PgServer, name: str) -> dict[str, Database]:
    """A fresh, empty database on each backend."""
    return {"sqlite": make_home(work / f"team-{name}-sqlite").db_path, "postgresql": pg.new_database(name)}


def run(quick: bool, work: Path, s: Settings | None = None) -> list[Figure]:
    """Every T row: bench/run.py's entry (``s`` None: the full or ``--quick`` sizes). Without
    PostgreSQL, one ``skipped`` row that says why."""
    s = s or (QUICK_TEAM if quick else FULL)
    for old in work.glob("team-*"):  # every figure but the reused big database starts empty
        shutil.rmtree(old)
    try:
        pg = PgServer.start()
    except GatekeeperError as exc:
        return [Figure(f"T. team rows: skipped: {exc.message}", 0, "", note=exc.hint or "")]
    try:
        figures = single_writer(write_databases(work, pg, "w1"), s)
        figures += many_writers(write_databases(work, pg, "w4"), s)
        figures += commit_rows(work, pg, s)
        figures += audit_rows(work, pg, s)
    finally:
        pg.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes: a smoke test, not comparable to the targets")
    size.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds (the test suite's)")
    parser.add_argument("--workdir", type=Path, help="work here (the big SQLite database is reused next time)")
    args = parser.parse_args(argv)
    s = SMOKE if args.smoke else QUICK_TEAM if args.quick else FULL
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gatekeeper-team-bench-") as tmp:
        work = args.workdir.absolute() if args.workdir else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        try:
            report = Report()
            for figure in run(s.quick, work, s):
                report.add(figure)
            print_table(report, s, work, time.perf_counter() - start)
        except Exception:
            traceback.print_exc()
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
