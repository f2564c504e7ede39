"""Figures 1 and 2: durable proposals per second, one writer and several writer processes at once.

Each ``Store.propose`` call is one ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL``; the
plain-sqlite3 reference runs the same statements on one kept-open connection, so a miss can be told
apart from a slow disk. The writer processes are ``spawn``ed, each with its own ``Store``.
"""

from __future__ import annotations

import hashlib
import sqlite3
import statistics
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from harness import Figure, Report, Settings, count_rows, draft, log, make_home, spawn_writers

from gatekeeper.audit.verify import verify_chain
from gatekeeper.canonical import canonical_json, new_id, now_ts
from gatekeeper.store import events as ev
from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import ProposalDraft, Store


def bench_draft(tag: str, i: int) -> ProposalDraft:
    """A distinct, small draft: a retry lookup never matches, so every call inserts a proposal."""
    path = f"bench/{tag}/{i}.md"
    content = f"# note {i}\n\nwritten by writer {tag}\n".encode()
    return draft(
        path, content, tool="create_note", workspace="/tmp/workspace", ttl=timedelta(hours=1), session=f"s-{tag}"
    )


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


def writer_process(db: str, tag: str, seconds: float, barrier: Any, results: Any) -> None:
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


def writer_runs(db: Path, s: Settings, run: int) -> list[dict[str, Any]]:
    """One run of ``s.writers`` spawned writer processes on ``db``, released together by a barrier."""
    return spawn_writers(writer_process, str(db), f"r{run}", s)


def many_writers(work: Path, s: Settings, report: Report) -> None:
    n = s.writers
    log(f"[2] {n} writer processes (spawn): {s.multi_runs} run(s) of {s.multi_seconds:g} s")
    home = make_home(work / "w4")
    rates: list[float] = []
    outs: list[dict[str, Any]] = []
    for run in range(s.multi_runs):
        these = writer_runs(home.db_path, s, run)
        rates.append(sum(o["ok"] for o in these) / max(o["elapsed"] for o in these))
        outs += these
    created = sum(o["ok"] for o in outs)
    messages = [m for o in outs for m in o["messages"]]
    report.add(
        Figure(
            f"2. proposals/s, {n} writer processes",
            statistics.median(rates),
            "/s",
            2_000,
            note="runs: " + ", ".join(f"{r:,.0f}" for r in rates),
        )
    )
    report.add(Figure('2. "database is locked" errors', sum(o["locked"] for o in outs), "", 0, "=="))
    report.add(Figure("2. other errors", sum(o["other"] for o in outs), "", 0, "==", note="; ".join(messages[:3])))
    chain_figure(home.db_path, created, report)


def chain_figure(db: Path, created: int, report: Report) -> None:
    """After the concurrent writes: the chain verifies and holds exactly one event per proposal made."""
    with Reader(db) as reader:
        chain = verify_chain(reader)
    rows = count_rows(db, "audit_event")
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
