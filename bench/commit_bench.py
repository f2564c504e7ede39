"""Committer benchmarks: 4 KiB files committed per second with full fsync, and approval-to-file
latency of ``gatekeeper commit --watch``; and 4 KiB replaces of existing files per second (5r).
Called by bench/run.py (figures 5 and 6); also runs alone:

    .venv/bin/python bench/commit_bench.py [--quick] [--workdir DIR]

5. files/s: N approved 4 KiB proposals, one in-process committer pass (batches of 64: one intent
   transaction and one outcome transaction per batch, an fsync per file, one per folder), median of
   3 runs on fresh homes; with batch size 1 once, for context. Every run checks its own result.
5r. replaces/s: the same over N existing 4 KiB files, each replaced by compare-and-swap.
6. watch latency: a real ``commit --watch`` subprocess; each of ≥ 50 approvals is made through
   ``Store.decide`` and timed until its file exists (polled every 0.5 ms), at random moments
   relative to the watcher's 50 ms tick.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from argon2 import PasswordHasher

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gatekeeper.canonical import format_ts, utc_now  # noqa: E402
from gatekeeper.commit.committer import Committer, PolicySource  # noqa: E402
from gatekeeper.home import Home, ensure_keys  # noqa: E402
from gatekeeper.store import migrate  # noqa: E402
from gatekeeper.store.proofs import PasswordProof  # noqa: E402
from gatekeeper.store.queries import Reader  # noqa: E402
from gatekeeper.store.store import ProposalDraft, Store  # noqa: E402

# The reviewer approves with the password typed again; a cheap argon2id hash, so the figures time
# the committer, not the password check.
REVIEWER_PASSWORD = "bench reviewer password"
REVIEWER_HASH = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash(REVIEWER_PASSWORD)

FILE_BYTES = 4096
POLICY = """version: 1
servers:
  notes:
    command: python
    workspace: {workspace}
    tools:
      create_note:
        propose:
          path: {{arg: path}}
          content: {{arg: body}}
          globs: ["bench/**"]
      replace_note:
        propose: {{mode: replace, path: {{arg: path}}, content: {{arg: body}}, globs: ["bench/**"]}}
"""


@dataclasses.dataclass(frozen=True)
class Bed:
    home: Home
    workspace: Path
    policy: Path


def make_bed(root: Path) -> Bed:
    shutil.rmtree(root, ignore_errors=True)
    home = Home(root / "home")
    home.create()
    home.ensure_key()
    migrate.upgrade(home.db_path)
    ensure_keys(home)
    workspace = root / "workspace"
    workspace.mkdir()
    policy = root / "policy.yaml"
    policy.write_text(POLICY.format(workspace=workspace))
    with Store(home.db_path) as s:
        s.add_reviewer("alice", REVIEWER_HASH)
    return Bed(home, workspace, policy)


def propose(bed: Bed, store: Store, i: int, *, approve: bool = True, base: bytes | None = None) -> tuple[str, str, str]:
    """A 4 KiB proposal, a create or (with ``base``) a replace of the file there; returns (id, sha256, path)."""
    path = f"bench/d{i % 8}/f{i}.md"
    content = (f"{i}:".encode() + os.urandom(FILE_BYTES))[:FILE_BYTES]
    p = store.propose(
        ProposalDraft(
            server="notes",
            tool="create_note" if base is None else "replace_note",
            mode="create" if base is None else "replace",
            base=base,
            arguments={"path": path, "n": i},
            workspace=str(bed.workspace),
            path=path,
            content=content,
            policy_digest="0" * 64,
            expires_at=format_ts(utc_now() + timedelta(hours=1)),
            session_id="bench",
        )
    )
    if approve:
        approve_one(bed, store, p.id, p.sha256, path, base)
    return p.id, p.sha256, path


def approve_one(bed: Bed, store: Store, pid: str, sha: str, path: str, base: bytes | None = None) -> None:
    change = {} if base is None else {"mode": "replace", "base_sha256": hashlib.sha256(base).hexdigest()}
    proof = PasswordProof(REVIEWER_PASSWORD)  # every approval carries proof (issue 14)
    store.decide(pid, verdict="approved", reviewer="alice", sha256=sha, path=path, proof=proof, **change)


def replace_rate(root: Path, n: int, batch: int) -> float:
    """Replaces/s of one committer pass over ``n`` approved replaces of 4 KiB files (compare-and-swap:
    O_TMPFILE, fsync, link, RENAME_EXCHANGE, hash what came out, one folder fsync per folder)."""
    bed = make_bed(root)
    bases = {}
    for i in range(n):
        target = bed.workspace / f"bench/d{i % 8}/f{i}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        bases[i] = os.urandom(FILE_BYTES)
        target.write_bytes(bases[i])
    os.sync()  # the existing files' own writeback is not the committer's cost
    with Store(bed.home.db_path) as store, Reader(bed.home.db_path) as reader:
        made = {propose(bed, store, i, base=bases[i])[2]: i for i in range(n)}
        committer = Committer(bed.home, store, reader, PolicySource(str(bed.policy), bed.home.path), batch=batch)
        start = time.perf_counter()
        report = committer.run_pass()
        elapsed = time.perf_counter() - start
        contents = reader.proposal_contents([r.proposal_id for r in report.results])
    applied = [r for r in report.results if r.outcome == "applied"]
    wrong = [r.path for r in applied if (bed.workspace / r.path).read_bytes() != contents[r.proposal_id]]
    if len(applied) != n or wrong or len(made) != n:
        raise RuntimeError(f"the committer applied {len(applied)} of {n} replaces ({wrong[:3]}): {report.results[:1]}")
    left = [p.name for p in bed.workspace.rglob(".gatekeeper-*")]
    if left:
        raise RuntimeError(f"temporary names left behind: {left[:3]}")
    return n / elapsed


def commit_rate(root: Path, n: int, batch: int) -> float:
    """Files/s of one committer pass over ``n`` waiting approvals (setup not timed)."""
    bed = make_bed(root)
    with Store(bed.home.db_path) as store, Reader(bed.home.db_path) as reader:
        for i in range(n):
            propose(bed, store, i)
        committer = Committer(bed.home, store, reader, PolicySource(str(bed.policy), bed.home.path), batch=batch)
        start = time.perf_counter()
        report = committer.run_pass()
        elapsed = time.perf_counter() - start
    created = sum(r.outcome == "created" and r.linked for r in report.results)
    files = sum(1 for _ in bed.workspace.rglob("*.md"))
    if created != n or files != n:
        raise RuntimeError(f"the committer created {created} of {n} files ({files} on disk): {report.results[:1]}")
    return n / elapsed


def watch_latencies(root: Path, approvals: int, log: Callable[[str], None]) -> list[float]:
    bed = make_bed(root)
    env = {**os.environ, "GATEKEEPER_HOME": str(bed.home.path), "PYTHONPATH": str(REPO)}
    for var in [v for v in env if v.startswith(("GATEKEEPER_CRASH", "GATEKEEPER_PLANT", "GATEKEEPER_PAUSE"))]:
        env.pop(var)
    errors = open(root / "watch-stderr.txt", "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "gatekeeper", "commit", "--watch", "--policy", str(bed.policy)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=errors,
    )
    rng = random.Random(6)
    latencies = []
    try:
        deadline = time.monotonic() + 60
        while "Watching" not in (root / "watch-stderr.txt").read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"commit --watch did not start: {(root / 'watch-stderr.txt').read_text()}")
            time.sleep(0.01)
        with Store(bed.home.db_path) as store:
            for i in range(approvals):
                pid, sha, path = propose(bed, store, i, approve=False)
                target = bed.workspace / path
                time.sleep(rng.uniform(0, 0.1))  # a reviewer's random pace: the workload, not a wait
                approve_one(bed, store, pid, sha, path)
                start = time.perf_counter()
                while not target.exists():
                    if time.perf_counter() - start > 10:
                        raise RuntimeError(f"no file 10 s after approval {i}")
                    time.sleep(0.0005)  # a tight poll with a deadline: the latency being measured
                latencies.append(time.perf_counter() - start)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        errors.close()
    log(f"  watch: {approvals} approvals, exit {proc.returncode}")
    return latencies


def figures(work: Path, *, quick: bool, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """The rows for bench/run.py's table: Figure(**row) for each."""
    n, runs, approvals = (300, 3, 50) if quick else (2000, 3, 100)
    root = work / "commit"
    log(f"[5] committer: {runs} passes of {n} approved 4 KiB files (batch 64), then one with batch 1")
    rates = [commit_rate(root / f"r{k}", n, 64) for k in range(runs)]
    unbatched = commit_rate(root / "b1", n, 1)
    log(f"[5r] committer: {runs} passes of {n} approved replaces of 4 KiB files (batch 64)")
    replaces = [replace_rate(root / f"x{k}", n, 64) for k in range(runs)]
    log(f"[6] commit --watch: approval-to-file latency over {approvals} approvals")
    lat = sorted(x * 1000 for x in watch_latencies(root / "watch", approvals, log))
    p50, p99 = statistics.median(lat), lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
    shutil.rmtree(root, ignore_errors=True)
    return [
        {
            "name": "5. files committed/s, 4 KiB, full fsync",
            "value": statistics.median(rates),
            "unit": "/s",
            "target": 1_000,
            "note": "runs: " + ", ".join(f"{r:,.0f}" for r in rates) + f" ({n} files each, batch 64, in-process pass)",
        },
        {
            "name": "5. reference: same, one proposal per transaction",
            "value": unbatched,
            "unit": "/s",
            "note": "batch 1: two durable transactions per file on top of its two fsyncs",
        },
        {
            "name": "5r. replaces committed/s, 4 KiB, full fsync",
            "value": statistics.median(replaces),
            "unit": "/s",
            "note": "runs: " + ", ".join(f"{r:,.0f}" for r in replaces) + f" ({n} existing files, compare-and-swap)",
        },
        {
            "name": "6. commit --watch approval-to-file p50",
            "value": p50,
            "unit": "ms",
            "target": 300,
            "cmp": "<",
            "note": f"{approvals} approvals, min {lat[0]:.0f} ms, max {lat[-1]:.0f} ms",
        },
        {"name": "6. commit --watch approval-to-file p99", "value": p99, "unit": "ms"},
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--workdir", type=Path, help="work here instead of a temporary folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gatekeeper-commit-bench-") as tmp:
        work = args.workdir.absolute() if args.workdir else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = figures(work, quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))
    for row in rows:
        target = f"  target {row.get('cmp', '>=')} {row['target']:,}" if row.get("target") else ""
        print(f"{row['name']}: {row['value']:,.1f} {row['unit']}{target}  {row.get('note', '')}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
