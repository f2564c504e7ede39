"""The synthetic audit database for figures 3 and 4: a year of realistic history, written directly.

``Store.propose`` would take ~10 minutes for a million events, so the rows, payloads, signatures and
hash chain are written with ``executemany`` instead; they are the same bytes the store would write
(``verify_chain`` checks it). The builder is seeded, so every build of a size is the same history.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import random
import shutil
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness import log, make_home

from gatekeeper.canonical import format_ts, new_id
from gatekeeper.home import Home
from gatekeeper.store import events as ev
from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.signed_rows import reviewer_signed
from gatekeeper.trust import signing
from gatekeeper.trust.keys import Signer

US = 1_000_000
DAY_US = 86_400 * US
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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
TTL_US = 7 * DAY_US
SPAN_US = 365 * DAY_US
FILLER = -1  # the step of a heap entry that is a filler event, not a follow-up

Info = tuple[str, str, str, int]  # (proposal id, path, sha256, fate) of a proposal with follow-ups
Entry = tuple[int, int, int, Any]  # (time in µs, tie-breaker, step, info) in the follow-up heap


@lru_cache(maxsize=4096)
def _day(day: int) -> str:
    return (EPOCH + timedelta(days=day)).strftime("%Y-%m-%dT")


def ts(us: int) -> str:
    """``format_ts`` of a time in integer microseconds since the epoch, ~5x faster."""
    day, rest = divmod(us, DAY_US)
    secs, micro = divmod(rest, US)
    hours, secs = divmod(secs, 3600)
    minutes, secs = divmod(secs, 60)
    return f"{_day(day)}{hours:02d}:{minutes:02d}:{secs:02d}.{micro:06d}Z"


@dataclass
class BigDb:
    """A built database and what is in it (``reused``: found built in ``--workdir``)."""

    home: Home
    events: int
    proposals: int
    pending: int
    build_seconds: float
    reused: bool


class Bulk:
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
            "signature, mode, method, key_id) VALUES (?,?,?,?,?,?,?,?,'create',?,?)",
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


def plan(n_events: int, now_us: int, rng: random.Random) -> tuple[list[int], list[int]]:
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


def open_fixture(home: Home) -> sqlite3.Connection:
    """A throw-away fixture: no journal, no fsync, a big cache. The file goes back to WAL at the end."""
    conn = sqlite3.connect(home.db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -524288")
    return conn


def write_header(bulk: Bulk, home: Home, t0: int, signer: Signer) -> None:
    """The init event and the reviewers, as ``gatekeeper init`` and ``reviewer add`` leave them
    (each row signed for the seq of its ``reviewer_added`` event)."""
    init = {"home": str(home.path), "created_home": True, "created_key": True, "created_db": True}
    bulk.event(t0, ev.INIT, "cli", None, {**init, "applied": ["0001"]})
    for k, name in enumerate(REVIEWERS):
        at, password_hash = ts(t0 + k * US), "$argon2id$bench-placeholder"
        signed = reviewer_signed(signer, bulk.seq + 1, name, password_hash, at, None)
        bulk.conn.execute(
            "INSERT INTO reviewer (name, password_hash, created_at, key_id, signature) VALUES (?, ?, ?, ?, ?)",
            (name, password_hash, at, signed["key_id"], signed["signature"]),
        )
        bulk.event(t0 + k * US, ev.REVIEWER_ADDED, "cli", None, {"reviewer": name, **signed})


def write_proposal(bulk: Bulk, i: int, t: int) -> tuple[str, str, str, str, str]:
    """Proposal ``i`` created at ``t``: its row and its event; (id, path, sha256, args_sha256, session)."""
    server, tool = SERVERS[i % len(SERVERS)]
    pid = new_id(t // 1000)
    path = f"{server}/{ts(t)[:7]}/note-{i}.md"
    content = f"# Note {i}\n\n{'lorem ipsum ' * (1 + i % 8)}\n".encode()
    arguments = _canon({"path": path, "content": content.decode()})
    args_sha = hashlib.sha256(arguments.encode()).hexdigest()
    sha = hashlib.sha256(content).hexdigest()
    session = f"session-{i // 25}"
    expires = ts(t + TTL_US)
    client = ("claude-code", "2.1.0", "2025-11-25")
    bulk.proposals.append(
        (pid, ts(t), server, tool, arguments, args_sha, "/srv/workspace", path, content, sha, len(content),
         "text", *client, session, "0" * 64, expires)
    )  # fmt: skip
    payload = {
        "server": server, "tool": tool, "path": path, "sha256": sha, "size": len(content),
        "args_sha256": args_sha, "expires_at": expires, "client": client[0], "client_version": client[1],
        "protocol_version": client[2], "session_id": session, "policy_digest": "0" * 64,
    }  # fmt: skip
    bulk.event(t, ev.PROPOSAL_CREATED, "proxy", pid, payload)
    return pid, path, sha, args_sha, session


def filler(bulk: Bulk, at_us: int, last: tuple[str, str, str] | None, rng: random.Random) -> None:
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


def decide(bulk: Bulk, at_us: int, info: Info, signer: Signer, rng: random.Random) -> None:
    """A reviewer's decision on a proposal, Ed25519-signed over what the committer acts on as the
    review page signs it (``store/decisions.record_decision``; an approval by password typed again):
    its row and its event."""
    pid, path, sha, fate = info
    reviewer = REVIEWERS[rng.randrange(len(REVIEWERS))]
    verdict = "rejected" if fate == REJECTED else "approved"
    reason = "please keep notes under 1 kB" if fate == REJECTED else None
    method = None if fate == REJECTED else "password"
    at = ts(at_us)
    server = path.split("/", 1)[0]  # write_proposal's paths start with their server's name
    tool = dict(SERVERS)[server]
    facts = signing.DecisionFacts(
        proposal_id=pid, server=server, tool=tool, workspace="/srv/workspace", workspace_real=None, path=path,
        mode="create", base_sha256=None, sha256=sha, verdict=verdict, reviewer=reviewer, reason=reason,
        decided_at=at, method=method,
    )  # fmt: skip
    signature = signer.sign(facts.message(signer.key_id))
    bulk.decisions.append((pid, verdict, reviewer, reason, sha, path, at, signature, method, signer.key_id))
    payload = {"verdict": verdict, "reviewer": reviewer, "reason": reason, "sha256": sha, "path": path}
    payload |= {"mode": "create", "base_sha256": None} | ({} if method is None else {"method": method})
    bulk.event(
        at_us, ev.DECISION, f"reviewer:{reviewer}", pid, {**payload, "key_id": signer.key_id, "signature": signature}
    )


def commit_outcome(bulk: Bulk, at_us: int, info: Info) -> None:
    """The committer's outcome for an approved proposal: its commit record and its event."""
    pid, path, sha, fate = info
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


def follow_up(
    bulk: Bulk, at_us: int, step: int, info: Info, signer: Signer, rng: random.Random, heap: list[Entry]
) -> None:
    """Step 0: the decision; 1: the commit intent; 2: the commit outcome (with its record)."""
    if step == 0:
        decide(bulk, at_us, info, signer, rng)
        if info[3] in OUTCOME_NAME:
            heapq.heappush(heap, (at_us + rng.randrange(50_000, 500_000), bulk.seq + 2**40, 1, info))
    elif step == 1:
        pid, path, sha, _ = info
        bulk.event(at_us, ev.COMMIT_INTENT, "committer", pid, {"path": path, "sha256": sha})
        heapq.heappush(heap, (at_us + rng.randrange(2_000, 50_000), bulk.seq + 2**40, 2, info))
    else:
        commit_outcome(bulk, at_us, info)


class History:
    """Writes proposals in time order while follow-up events (decisions, commits) and fillers
    (retries, denied tools) wait in a heap keyed by time, so that seq order is time order, as in
    a real log."""

    def __init__(
        self, bulk: Bulk, signer: Signer, rng: random.Random, fillers: int, first_us: int, now_us: int
    ) -> None:
        self.bulk, self.signer, self.rng, self.now_us = bulk, signer, rng, now_us
        self.heap: list[Entry] = [(rng.randrange(first_us, now_us), i, FILLER, None) for i in range(fillers)]
        heapq.heapify(self.heap)
        self.tick = fillers
        self.last: tuple[str, str, str] | None = None  # (id, args_sha256, session) of the newest proposal

    def drain(self, until_us: int) -> None:
        """Write every waiting event due by ``until_us``."""
        while self.heap and self.heap[0][0] <= until_us:
            at_us, _, step, info = heapq.heappop(self.heap)
            if step == FILLER:
                filler(self.bulk, at_us, self.last, self.rng)
            else:
                follow_up(self.bulk, at_us, step, info, self.signer, self.rng, self.heap)

    def propose(self, i: int, t: int, fate: int) -> None:
        """Proposal ``i`` at ``t``, after everything due before it; its decision is scheduled."""
        self.drain(t)
        pid, path, sha, args_sha, session = write_proposal(self.bulk, i, t)
        self.last = (pid, args_sha, session)
        if fate not in (PENDING, EXPIRED):
            delay = min(int(self.rng.expovariate(1 / 1800) * US) + 5 * US, TTL_US * 9 // 10)
            delay = min(delay, (self.now_us - t) // 2)
            self.tick += 1
            heapq.heappush(self.heap, (t + delay, self.tick, 0, (pid, path, sha, fate)))


def build_big_db(path: Path, n_events: int, seed: int = 7) -> BigDb:
    """A year of realistic history with exactly ``n_events`` events, written directly (not via
    ``Store.propose``, which would take ~10 minutes) but with the same rows, payloads and chain."""
    start = time.perf_counter()
    sample = datetime(2026, 3, 1, 12, 34, 56, 789012, tzinfo=UTC)
    assert ts(int(sample.timestamp()) * US + sample.microsecond) == format_ts(sample)
    rng = random.Random(seed)
    home = make_home(path)
    signer = home.keys.signer()
    now_us = int(time.time() * US) - 60 * US
    created, fates = plan(n_events, now_us, rng)
    header = 1 + len(REVIEWERS)
    fillers = n_events - header - sum(EVENTS_PER_FATE[f] for f in fates)
    assert fillers >= 0, "the plan overshot the event budget"

    conn = open_fixture(home)
    bulk = Bulk(conn)
    write_header(bulk, home, created[0] - DAY_US, signer)
    history = History(bulk, signer, rng, fillers, created[0], now_us)
    for i, (t, fate) in enumerate(zip(created, fates, strict=True)):
        history.propose(i, t, fate)
    history.drain(now_us + DAY_US)
    bulk.flush()
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    pending = sum(1 for f in fates if f == PENDING)
    assert bulk.seq == n_events, (bulk.seq, n_events)
    return BigDb(home, n_events, len(fates), pending, time.perf_counter() - start, False)


def load_or_build(path: Path, n_events: int) -> BigDb:
    """The database in ``path``, built once: a marker lets ``--workdir`` reuse it across runs."""
    marker = path / "built.json"
    if marker.is_file():
        info = json.loads(marker.read_text())
        return BigDb(Home(path), info["events"], info["proposals"], info["pending"], info["build_seconds"], True)
    if path.exists():
        shutil.rmtree(path)
    log(f"[3] building a {n_events:,}-event database in {path} ...")
    db = build_big_db(path, n_events)
    marker.write_text(json.dumps({k: getattr(db, k) for k in ("events", "proposals", "pending", "build_seconds")}))
    return db
