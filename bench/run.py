"""Gatekeeper benchmarks: durable write throughput, audit query latency and chain verification speed.

Everything runs against databases built here, in a temporary folder (never a user's home), so the
figures are repeatable. Targets that are not met are printed as MISSED; the exit status is 1 only
when the benchmark itself crashes. See bench/README.md for what each figure means.

    .venv/bin/python bench/run.py [--quick] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import multiprocessing as mp
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from gatekeeper import signing
from gatekeeper.audit.verify import verify_chain
from gatekeeper.canonical import canonical_json, format_ts, new_id, now_ts, utc_now
from gatekeeper.home import ENV_HOME, Home
from gatekeeper.store import events as ev
from gatekeeper.store import migrate
from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import ProposalDraft, Store


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
        if self.target is None:
            return None
        if self.cmp == ">=":
            return self.value >= self.target
        return self.value < self.target if self.cmp == "<" else self.value == self.target

    @property
    def shown(self) -> str:
        return str(self.value) if isinstance(self.value, int) else _fmt(self.value)


@dataclass
class Report:
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, figure: Figure) -> None:
        self.figures.append(figure)
        status = {None: "", True: "ok", False: "MISSED"}[figure.met]
        log(f"  {figure.name}: {figure.shown} {figure.unit} {status}")


def log(msg: str) -> None:
    """Progress goes to stderr so that stdout holds only the result table."""
    print(msg, file=sys.stderr, flush=True)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def median_time(fn: Callable[[], object], reps: int) -> float:
    """Median wall time of ``reps`` calls, in seconds (the median shrugs off one slow outlier)."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- homes ---------------------------------------------------------------------------------------


def make_home(path: Path) -> Home:
    """A real migrated home, as ``gatekeeper init`` makes it (without its init event)."""
    home = Home(path)
    home.create()
    home.ensure_key()
    migrate.upgrade(home.db_path)
    return home


def bench_draft(tag: str, i: int) -> ProposalDraft:
    """A distinct, small draft: a retry lookup never matches, so every call inserts a proposal."""
    path = f"bench/{tag}/{i}.md"
    content = f"# note {i}\n\nwritten by writer {tag}\n".encode()
    return ProposalDraft(
        server="notes",
        tool="create_note",
        arguments={"path": path, "content": content.decode()},
        workspace="/tmp/workspace",
        path=path,
        content=content,
        policy_digest="0" * 64,
        expires_at=format_ts(utc_now() + timedelta(hours=1)),
        client_name="bench",
        client_version="1",
        protocol_version="2025-11-25",
        session_id=f"s-{tag}",
    )


# -- figures 1 and 2: durable proposals per second ----------------------------------------------


def propose_for(store: Store, tag: str, seconds: float) -> tuple[int, float]:
    """Call ``Store.propose`` back to back for ``seconds``; return (proposals, elapsed)."""
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        store.propose(bench_draft(tag, count))
        count += 1
    return count, time.perf_counter() - start


def single_writer(work: Path, s: Settings, report: Report) -> None:
    log(f"[1] 1 writer: {s.write_runs} runs of {s.write_seconds:g} s")
    home = make_home(work / "w1")
    rates = []
    with Store(home.db_path) as store:
        for run in range(s.write_runs):
            count, elapsed = propose_for(store, f"r{run}", s.write_seconds)
            rates.append(count / elapsed)
    report.add(
        Figure(
            "1. proposals/s, 1 writer (FULL sync)",
            statistics.median(rates),
            "/s",
            2_000,
            note="runs: " + ", ".join(f"{r:,.0f}" for r in rates),
        )
    )
    count, elapsed = raw_propose_for(make_home(work / "w1raw").db_path, s.write_seconds)
    report.add(
        Figure(
            "1. reference: same rows, plain sqlite3",
            count / elapsed,
            "/s",
            note="same BEGIN IMMEDIATE transaction and FULL sync on one kept-open connection, one run: "
            "the disk's ceiling for figure 1, without Store's per-call connection and SQLAlchemy costs",
        )
    )


def raw_propose_for(db: Path, seconds: float) -> tuple[int, float]:
    """Store.propose's statements (retry lookup, proposal row, chained event) in plain sqlite3."""
    conn = sqlite3.connect(db, isolation_level=None)
    for pragma in ("busy_timeout = 10000", "journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON"):
        conn.execute(f"PRAGMA {pragma}")
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        d = bench_draft("raw", count)
        arguments = canonical_json(d.arguments, allow_floats=True)
        args_sha = hashlib.sha256(arguments.encode()).hexdigest()
        sha = hashlib.sha256(d.content).hexdigest()
        pid = new_id()
        conn.execute("BEGIN IMMEDIATE")
        now = now_ts()
        conn.execute(
            "SELECT p.id, p.expires_at FROM proposal p WHERE p.server = ? AND p.tool = ? "
            "AND p.args_sha256 = ? AND p.path = ? AND p.sha256 = ? AND p.expires_at > ? "
            "AND NOT EXISTS (SELECT 1 FROM decision d WHERE d.proposal_id = p.id) "
            "ORDER BY p.created_at DESC LIMIT 1",
            (d.server, d.tool, args_sha, d.path, sha, now),
        ).fetchone()
        conn.execute(
            "INSERT INTO proposal (id, created_at, server, tool, arguments, args_sha256, workspace, path, "
            "content, sha256, size, encoding, client_name, client_version, protocol_version, session_id, "
            "policy_digest, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (pid, now, d.server, d.tool, arguments, args_sha, d.workspace, d.path, d.content, sha,
             len(d.content), d.encoding, d.client_name, d.client_version, d.protocol_version,
             d.session_id, d.policy_digest, d.expires_at),
        )  # fmt: skip
        last = conn.execute("SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1").fetchone()
        seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
        payload = canonical_json({
            "server": d.server, "tool": d.tool, "path": d.path, "sha256": sha, "size": len(d.content),
            "args_sha256": args_sha, "expires_at": d.expires_at, "client": d.client_name,
            "client_version": d.client_version, "protocol_version": d.protocol_version,
            "session_id": d.session_id, "policy_digest": d.policy_digest,
        })  # fmt: skip
        at = now_ts()
        digest = event_hash(prev, seq, at, ev.PROPOSAL_CREATED, "proxy", pid, payload)
        conn.execute(
            "INSERT INTO audit_event VALUES (?,?,?,?,?,?,?,?)",
            (seq, at, ev.PROPOSAL_CREATED, "proxy", pid, payload, prev, digest),
        )
        conn.execute("COMMIT")
        count += 1
    elapsed = time.perf_counter() - start
    conn.close()
    return count, elapsed


def _writer_process(db: str, tag: str, seconds: float, barrier: Any, results: Any) -> None:
    """One writer process: its own Store, started with the others at the barrier."""
    try:
        store = Store(Path(db))
        barrier.wait(timeout=120)
        ok = locked = other = 0
        messages: list[str] = []
        start = time.perf_counter()
        deadline = start + seconds
        i = 0
        while time.perf_counter() < deadline:
            try:
                store.propose(bench_draft(tag, i))
                ok += 1
            except Exception as exc:  # counted, not fatal: the figure is how many fail
                if "database is locked" in str(exc):
                    locked += 1
                else:
                    other += 1
                    if len(messages) < 3:
                        messages.append(f"{type(exc).__name__}: {exc}")
            i += 1
        elapsed = time.perf_counter() - start
        store.close()
        results.put({"ok": ok, "locked": locked, "other": other, "messages": messages, "elapsed": elapsed})
    except BaseException as exc:
        results.put({"crash": f"{type(exc).__name__}: {exc}"})


def many_writers(work: Path, s: Settings, report: Report) -> None:
    n = s.writers
    log(f"[2] {n} writer processes (spawn): {s.multi_runs} run(s) of {s.multi_seconds:g} s")
    home = make_home(work / "w4")
    ctx = mp.get_context("spawn")
    rates, created, locked, other, messages = [], 0, 0, 0, []
    for run in range(s.multi_runs):
        barrier, results = ctx.Barrier(n), ctx.Queue()
        procs = [
            ctx.Process(
                target=_writer_process,
                args=(str(home.db_path), f"r{run}p{k}", s.multi_seconds, barrier, results),
            )
            for k in range(n)
        ]
        for p in procs:
            p.start()
        outs = [results.get(timeout=s.multi_seconds + 180) for _ in procs]
        for p in procs:
            p.join(timeout=30)
        crashes = [o["crash"] for o in outs if "crash" in o]
        if crashes:
            raise RuntimeError(f"writer process crashed: {crashes}")
        total = sum(o["ok"] for o in outs)
        rates.append(total / max(o["elapsed"] for o in outs))
        created += total
        locked += sum(o["locked"] for o in outs)
        other += sum(o["other"] for o in outs)
        messages += [m for o in outs for m in o["messages"]]
    report.add(
        Figure(
            f"2. proposals/s, {n} writer processes",
            statistics.median(rates),
            "/s",
            2_000,
            note="runs: " + ", ".join(f"{r:,.0f}" for r in rates),
        )
    )
    report.add(Figure('2. "database is locked" errors', locked, "", 0, "=="))
    report.add(Figure("2. other errors", other, "", 0, "==", note="; ".join(messages[:3])))
    with Reader(home.db_path) as reader:
        chain = verify_chain(reader)
        rows = reader.event_count()
    intact = chain.ok and chain.count == rows == created
    report.add(
        Figure(
            "2. chain intact after concurrent writes",
            int(intact),
            "(1 = yes)",
            1,
            "==",
            note=f"verify ok={chain.ok}, {chain.count} verified, {rows} rows, {created} proposals"
            + (f", problem: {chain.problem}" if chain.problem else ""),
        )
    )


# -- the big audit database for figures 3 and 4 --------------------------------------------------

_US = 1_000_000
_DAY_US = 86_400 * _US
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Same bytes as gatekeeper.canonical.canonical_json for float-free objects, without its float scan
# (which would double the build time of a million payloads).
_canon = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode

PENDING, EXPIRED, REJECTED, APPROVED, CREATED, CONFLICT, FAILED, REFUSED = range(8)
EVENTS_PER_FATE = {
    PENDING: 1,
    EXPIRED: 1,
    REJECTED: 2,
    APPROVED: 2,
    CREATED: 4,
    CONFLICT: 4,
    FAILED: 4,
    REFUSED: 4,
}
OUTCOME_NAME = {CREATED: "created", CONFLICT: "conflict", FAILED: "failed", REFUSED: "refused"}
OUTCOME_DETAIL = {
    CREATED: "",
    CONFLICT: "the file exists with other content",
    FAILED: "permission denied",
    REFUSED: "the path resolves outside the workspace",
}
REVIEWERS = ("alice", "bob", "carol")
SERVERS = (("notes", "create_note"), ("docs", "write_file"), ("wiki", "create_page"))
TTL_US = 7 * _DAY_US
SPAN_US = 365 * _DAY_US


@lru_cache(maxsize=4096)
def _day(day: int) -> str:
    return (_EPOCH + timedelta(days=day)).strftime("%Y-%m-%dT")


def ts(us: int) -> str:
    """``format_ts`` of a time in integer microseconds since the epoch, ~5x faster."""
    day, rest = divmod(us, _DAY_US)
    secs, micro = divmod(rest, _US)
    hours, secs = divmod(secs, 3600)
    minutes, secs = divmod(secs, 60)
    return f"{_day(day)}{hours:02d}:{minutes:02d}:{secs:02d}.{micro:06d}Z"


@dataclass
class BigDb:
    home: Home
    events: int
    proposals: int
    pending: int
    build_seconds: float
    reused: bool


class _Bulk:
    """Appends hash-chained events and their rows, flushed with executemany in big transactions."""

    FLUSH_EVENTS = 200_000

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.seq, self.prev = 0, GENESIS
        self.events: list[tuple[Any, ...]] = []
        self.proposals: list[tuple[Any, ...]] = []
        self.decisions: list[tuple[Any, ...]] = []
        self.commits: list[tuple[Any, ...]] = []

    def event(self, at_us: int, kind: str, actor: str, pid: str | None, payload: dict[str, Any]) -> None:
        self.seq += 1
        at, text = ts(at_us), _canon(payload)
        digest = event_hash(self.prev, self.seq, at, kind, actor, pid, text)
        self.events.append((self.seq, at, kind, actor, pid, text, self.prev, digest))
        self.prev = digest
        if len(self.events) >= self.FLUSH_EVENTS:
            self.flush()

    def flush(self) -> None:
        c = self.conn
        c.execute("BEGIN")
        c.executemany(
            "INSERT INTO proposal (id, created_at, server, tool, arguments, args_sha256, workspace, path, "
            "content, sha256, size, encoding, client_name, client_version, protocol_version, session_id, "
            "policy_digest, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            self.proposals,
        )
        c.executemany(
            "INSERT INTO decision (proposal_id, verdict, reviewer, reason, sha256, path, decided_at, "
            "signature) VALUES (?,?,?,?,?,?,?,?)",
            self.decisions,
        )
        c.executemany(
            "INSERT INTO commit_record (proposal_id, outcome, observed_sha256, final_path, detail, at) "
            "VALUES (?,?,?,?,?,?)",
            self.commits,
        )
        c.executemany("INSERT INTO audit_event VALUES (?,?,?,?,?,?,?,?)", self.events)
        c.execute("COMMIT")
        self.events, self.proposals, self.decisions, self.commits = [], [], [], []


def _plan(n_events: int, now_us: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """Creation times and fates of the proposals: ~1.5% pending (the last week's), the rest decided
    (mostly committed), expired or rejected, filling ~93% of ``n_events``."""
    mean_events = 0.08 * 1 + 0.07 * 2 + 0.85 * 4
    n = int(n_events * 0.93 / mean_events)
    start, step = now_us - SPAN_US, SPAN_US // n
    created, fates = [], []
    for i in range(n):
        t = start + i * step + rng.randrange(step // 2)
        r = rng.random()
        if t > now_us - TTL_US:  # still inside its expiry window: mostly undecided
            fate = PENDING if r < 0.8 else CREATED if r < 0.98 else REJECTED if r < 0.995 else APPROVED
        elif r < 0.08:
            fate = EXPIRED
        elif r < 0.15:
            fate = REJECTED
        else:
            r = rng.random()
            fate = CREATED if r < 0.975 else CONFLICT if r < 0.99 else FAILED if r < 0.997 else REFUSED
        created.append(t)
        fates.append(fate)
    return created, fates


def build_big_db(path: Path, n_events: int, seed: int = 7) -> BigDb:
    """A year of realistic history with exactly ``n_events`` events, written directly (not via
    ``Store.propose``, which would take ~10 minutes) but with the same rows, payloads and chain."""
    start = time.perf_counter()
    sample = datetime(2026, 3, 1, 12, 34, 56, 789012, tzinfo=UTC)
    assert ts(int(sample.timestamp()) * _US + sample.microsecond) == format_ts(sample)
    rng = random.Random(seed)
    home = make_home(path)
    key = home.read_key()
    now_us = int(time.time() * _US) - 60 * _US
    created, fates = _plan(n_events, now_us, rng)
    header = 1 + len(REVIEWERS)
    fillers = n_events - header - sum(EVENTS_PER_FATE[f] for f in fates)
    assert fillers >= 0, "the plan overshot the event budget"

    conn = sqlite3.connect(home.db_path, isolation_level=None)
    # A throw-away fixture: no journal, no fsync, a big cache. The file goes back to WAL below.
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -524288")
    bulk = _Bulk(conn)
    t0 = created[0] - _DAY_US
    bulk.event(
        t0,
        ev.INIT,
        "cli",
        None,
        {
            "home": str(home.path),
            "created_home": True,
            "created_key": True,
            "created_db": True,
            "applied": ["0001"],
        },
    )
    for k, name in enumerate(REVIEWERS):
        conn.execute(
            "INSERT INTO reviewer (name, password_hash, created_at) VALUES (?, ?, ?)",
            (name, "$argon2id$bench-placeholder", ts(t0 + k * _US)),
        )
        bulk.event(t0 + k * _US, ev.REVIEWER_ADDED, "cli", None, {"reviewer": name})

    # Follow-up events (decisions, commits) and fillers (retries, denied tools) wait in a heap
    # keyed by time, so that seq order is time order, as in a real log.
    heap: list[tuple[int, int, int, Any]] = [(rng.randrange(created[0], now_us), i, -1, None) for i in range(fillers)]
    heapq.heapify(heap)
    tick = fillers
    last: tuple[str, str, str] | None = None  # (id, args_sha256, session) of the newest proposal

    def drain(until_us: int) -> None:
        nonlocal last
        while heap and heap[0][0] <= until_us:
            at_us, _, step, info = heapq.heappop(heap)
            if step == -1:
                _filler(bulk, at_us, last, rng)
            else:
                _follow_up(bulk, at_us, step, info, key, rng, heap)

    for i, (t, fate) in enumerate(zip(created, fates, strict=True)):
        drain(t)
        server, tool = SERVERS[i % len(SERVERS)]
        pid = new_id(t // 1000)
        path = f"{server}/{ts(t)[:7]}/note-{i}.md"
        content = f"# Note {i}\n\n{'lorem ipsum ' * (1 + i % 8)}\n".encode()
        arguments = _canon({"path": path, "content": content.decode()})
        args_sha = hashlib.sha256(arguments.encode()).hexdigest()
        sha = hashlib.sha256(content).hexdigest()
        session = f"session-{i // 25}"
        expires = ts(t + TTL_US)
        bulk.proposals.append(
            (
                pid,
                ts(t),
                server,
                tool,
                arguments,
                args_sha,
                "/srv/workspace",
                path,
                content,
                sha,
                len(content),
                "text",
                "claude-code",
                "2.1.0",
                "2025-11-25",
                session,
                "0" * 64,
                expires,
            )
        )
        bulk.event(
            t,
            ev.PROPOSAL_CREATED,
            "proxy",
            pid,
            {
                "server": server,
                "tool": tool,
                "path": path,
                "sha256": sha,
                "size": len(content),
                "args_sha256": args_sha,
                "expires_at": expires,
                "client": "claude-code",
                "client_version": "2.1.0",
                "protocol_version": "2025-11-25",
                "session_id": session,
                "policy_digest": "0" * 64,
            },
        )
        last = (pid, args_sha, session)
        if fate not in (PENDING, EXPIRED):
            delay = min(int(rng.expovariate(1 / 1800) * _US) + 5 * _US, TTL_US * 9 // 10)
            delay = min(delay, (now_us - t) // 2)
            tick += 1
            heapq.heappush(heap, (t + delay, tick, 0, (pid, path, sha, fate)))
    drain(now_us + _DAY_US)
    bulk.flush()
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    pending = sum(1 for f in fates if f == PENDING)
    assert bulk.seq == n_events, (bulk.seq, n_events)
    return BigDb(home, n_events, len(fates), pending, time.perf_counter() - start, False)


def _filler(bulk: _Bulk, at_us: int, last: tuple[str, str, str] | None, rng: random.Random) -> None:
    """Events that change no other table: agents retrying, tools the policy denies."""
    if last is not None and rng.random() < 0.6:
        pid, args_sha, session = last
        bulk.event(at_us, ev.PROPOSAL_REPEATED, "proxy", pid, {"session_id": session, "args_sha256": args_sha})
    else:
        bulk.event(
            at_us,
            ev.TOOL_DENIED,
            "proxy",
            None,
            {"server": "notes", "tool": "delete_note", "why": "denied by policy"},
        )


def _follow_up(
    bulk: _Bulk,
    at_us: int,
    step: int,
    info: tuple[str, str, str, int],
    key: bytes,
    rng: random.Random,
    heap: list[tuple[int, int, int, Any]],
) -> None:
    """Step 0: the decision; 1: the commit intent; 2: the commit outcome (with its record)."""
    pid, path, sha, fate = info
    if step == 0:
        reviewer = REVIEWERS[rng.randrange(len(REVIEWERS))]
        verdict = "rejected" if fate == REJECTED else "approved"
        reason = "please keep notes under 1 kB" if fate == REJECTED else None
        at = ts(at_us)
        signature = signing.sign(
            key,
            signing.decision_message(
                proposal_id=pid,
                verdict=verdict,
                reviewer=reviewer,
                reason=reason,
                sha256=sha,
                path=path,
                decided_at=at,
            ),
        )
        bulk.decisions.append((pid, verdict, reviewer, reason, sha, path, at, signature))
        bulk.event(
            at_us,
            ev.DECISION,
            f"reviewer:{reviewer}",
            pid,
            {
                "verdict": verdict,
                "reviewer": reviewer,
                "reason": reason,
                "sha256": sha,
                "path": path,
                "signature": signature,
            },
        )
        if fate in OUTCOME_NAME:
            heapq.heappush(heap, (at_us + rng.randrange(50_000, 500_000), bulk.seq + 2**40, 1, info))
    elif step == 1:
        bulk.event(at_us, ev.COMMIT_INTENT, "committer", pid, {"path": path, "sha256": sha})
        heapq.heappush(heap, (at_us + rng.randrange(2_000, 50_000), bulk.seq + 2**40, 2, info))
    else:
        outcome = OUTCOME_NAME[fate]
        observed = sha if fate == CREATED else hashlib.sha256(pid.encode()).hexdigest() if fate == CONFLICT else None
        final_path = f"/srv/workspace/{path}" if fate == CREATED else None
        detail = OUTCOME_DETAIL[fate]
        bulk.commits.append((pid, outcome, observed, final_path, detail, ts(at_us)))
        bulk.event(
            at_us,
            ev.COMMIT_OUTCOME,
            "committer",
            pid,
            {"outcome": outcome, "observed_sha256": observed, "final_path": final_path, "detail": detail},
        )


def big_db(work: Path, s: Settings, report: Report) -> BigDb:
    """Build the database once per work folder; a marker lets ``--workdir`` reuse it across runs."""
    path = work / f"big-{s.events}"
    marker = path / "built.json"
    if marker.is_file():
        info = json.loads(marker.read_text())
        db = BigDb(Home(path), info["events"], info["proposals"], info["pending"], info["build_seconds"], True)
    else:
        if path.exists():
            shutil.rmtree(path)
        log(f"[3] building a {s.events:,}-event database in {path} ...")
        db = build_big_db(path, s.events)
        marker.write_text(json.dumps({k: getattr(db, k) for k in ("events", "proposals", "pending", "build_seconds")}))
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


# -- figures 3 and 4: audit queries and verify ----------------------------------------------------


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("gatekeeper")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "gatekeeper"]


def run_cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ENV_HOME: str(home.path)}
    done = subprocess.run([*_cli(), *args], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"gatekeeper {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def query_plan(reader: Reader, call: Callable[[], object]) -> list[str]:
    """EXPLAIN QUERY PLAN of the SQL that ``call`` runs (caught with a trace callback)."""
    return reader.query_plan(call)


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
            secs = median_time(lambda st=status: reader.proposals(status=st, limit=50), s.query_reps)
            fig = Figure(
                f"3. Reader.proposals {label}, {size} events",
                secs * 1000,
                "ms",
                target,
                "<",
            )
            report.add(fig)
            # The plans explain the numbers, met or not.
            plan = query_plan(reader, lambda st=status: reader.proposals(status=st, limit=50))
            report.notes.append(f"query plan, {label}: " + " | ".join(plan))
    for status in ("pending", "committed", None):
        args = ["audit", "proposals", "--json"] + (["--status", status] if status else [])
        secs = median_time(lambda a=args: run_cli(db.home, *a), s.cli_reps)
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


# -- output ---------------------------------------------------------------------------------------


def print_table(report: Report, s: Settings, work: Path, total: float) -> None:
    rows = [("figure", "value", "unit", "target", "ratio", "status")]
    for f in report.figures:
        if f.target is None:
            target = ratio = status = ""
        else:
            op = {">=": "≥", "<": "<", "==": "="}[f.cmp]
            target = f"{op} {f.target:,}"
            ratio = f"{f.value / f.target:.3g}" if f.target and f.cmp != "==" else ""
            status = "ok" if f.met else "MISSED"
        rows.append((f.name, f.shown, f.unit, target, ratio, status))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        single_writer(work, s, report)
        many_writers(work, s, report)
        db = big_db(work, s, report)
        audit_queries(db, s, report)
        audit_verify(db, s, report)
        from commit_bench import figures as commit_figures  # bench/commit_bench.py: figures 5 and 6

        for row in commit_figures(work, quick=s.quick, log=log):
            report.add(Figure(**row))
        import proxy_bench  # bench/proxy_bench.py: P1-P3
        import review_bench  # bench/review_bench.py: R0-R2

        for figure in [*proxy_bench.run(s.quick, work), *review_bench.run(s.quick, work)]:
            report.add(figure)
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
