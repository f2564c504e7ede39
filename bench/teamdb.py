"""What bench/team_bench.py needs beside its figures: a durable throwaway PostgreSQL, homes on it,
committer beds, and the million-event history copied into PostgreSQL with COPY.

The cluster is scripts/postgres.py's (the test suite's), started with ``durable=True``: fsync,
full_page_writes and synchronous_commit stay on, so its proposals and commits are as durable as
SQLite's FULL sync. A template database is migrated once; each figure gets a copy of it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from argon2 import PasswordHasher
from harness import make_home

from gatekeeper.canonical import format_ts, utc_now
from gatekeeper.commit import faults
from gatekeeper.commit import run as commit_run
from gatekeeper.commit.committer import Committer, PolicySource
from gatekeeper.errors import GatekeeperError
from gatekeeper.home import URL_NAME, Home, ensure_keys
from gatekeeper.store import migrate
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import ProposalDraft, Store
from gatekeeper.store.target import Database, PostgresUrl, as_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from postgres import Cluster, PostgresUnavailable, install

COMMIT_FILES = "4 KiB, full fsync"
FILE_BYTES = 4096
TEMPLATE = "gk_bench_template"
REVIEWER_PASSWORD = "bench reviewer password"
# A cheap argon2id hash: the figures time the committer, not the password check.
REVIEWER_HASH = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash(REVIEWER_PASSWORD)
POLICY = """version: 1
servers:
  notes:
    command: python
    workspace: {workspace}
    tools:
      create_note:
        propose: {{path: {{arg: path}}, content: {{arg: body}}, globs: ["bench/**"]}}
"""
# The columns bigdb.Bulk writes, in that order (ids of decision and commit_record are made again
# by PostgreSQL in the same order, since the rows are copied in rowid order).
HISTORY = {
    "reviewer": ("name", "password_hash", "created_at"),
    "proposal": (
        "id", "created_at", "server", "tool", "arguments", "args_sha256", "workspace", "path", "content",
        "sha256", "size", "encoding", "client_name", "client_version", "protocol_version", "session_id",
        "policy_digest", "expires_at",
    ),
    "decision": ("proposal_id", "verdict", "reviewer", "reason", "sha256", "path", "decided_at", "signature"),
    "commit_record": ("proposal_id", "outcome", "observed_sha256", "final_path", "detail", "at"),
    "audit_event": ("seq", "at", "kind", "actor", "proposal_id", "payload", "prev_hash", "hash"),
}  # fmt: skip


class PgServer:
    """A durable throwaway cluster and its migrated template; ``GatekeeperError`` when unavailable."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @classmethod
    def start(cls) -> PgServer:
        try:
            cluster = Cluster(install(), durable=True).start()
        except PostgresUnavailable as exc:
            raise GatekeeperError(str(exc).splitlines()[0], "`make postgres` installs PostgreSQL") from None
        server = cls(cluster)
        server.admin(f"CREATE DATABASE {TEMPLATE}")
        migrate.upgrade(PostgresUrl(cluster.url(TEMPLATE)))
        return server

    def admin(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.cluster.conninfo(database), autocommit=True) as conn:
            conn.execute(sql)

    def new_database(self, name: str) -> PostgresUrl:
        """A fresh copy of the migrated template (``CREATE DATABASE ... TEMPLATE``)."""
        self.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return PostgresUrl(self.cluster.url(name))

    def stop(self) -> None:
        self.cluster.remove()

    def plan(self, name: str, call: Callable[[], object]) -> str:
        """The plan PostgreSQL ran for ``call``'s query, with actual rows and times (auto_explain in
        the server log): the real statement and parameters, not a copy of the SQL."""
        for setting in ("session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = 0",
                        "auto_explain.log_analyze = on", "auto_explain.log_format = 'json'"):  # fmt: skip
            self.admin(f"ALTER DATABASE {name} SET {setting}")
        try:
            call()
        finally:
            self.admin(f"ALTER DATABASE {name} RESET ALL")
        log_text = (self.cluster.base / "log").read_text(errors="replace")
        at = log_text.rfind("plan:")
        if at < 0:
            return "no plan in the server log"
        found, _ = json.JSONDecoder().raw_decode(log_text[log_text.index("{", at) :])
        return " > ".join(plan_nodes(found["Plan"]))


def plan_nodes(node: dict[str, Any], depth: int = 0) -> list[str]:
    """A plan tree as one line per node: type, index or table, actual rows and ms."""
    on = node.get("Index Name") or node.get("Relation Name") or ""
    kind = f"{node['Node Type']}{' ' + node['Join Type'] if 'Join Type' in node else ''}"
    text = f"{kind}{' ' + on if on else ''} rows={node.get('Actual Rows')} {node.get('Actual Total Time')}ms"
    out = [("." * depth) + text]
    for child in node.get("Plans", []):
        out += plan_nodes(child, depth + 1)
    return out


def pg_home(path: Path, url: PostgresUrl) -> Home:
    """A home whose ``database_url`` file names ``url`` (its keys beside it, as ``init`` makes them)."""
    home = Home(path)
    home.create()
    home.ensure_key()
    (path / URL_NAME).write_text(as_url(url) + "\n")
    ensure_keys(home)
    return home


@dataclasses.dataclass
class Fill:
    seconds: float
    note: str


def copy_history(source: Path, url: PostgresUrl) -> Fill:
    """Every row bigdb wrote, copied with COPY in rowid order; the hash chain is the one bigdb
    computed in Python. Indexes stay in place during the fill and no trigger is disabled (the
    append-only triggers fire on UPDATE and DELETE only). Then VACUUM ANALYZE, as autovacuum would."""
    import psycopg

    start = time.perf_counter()
    counts = {}
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    with psycopg.connect(url.conninfo) as conn, conn.cursor() as cur:
        for table, cols in HISTORY.items():
            names = ", ".join(cols)
            with cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                n = 0
                for row in src.execute(f"SELECT {names} FROM {table} ORDER BY rowid"):
                    copy.write_row(row)
                    n += 1
            counts[table] = n
        conn.commit()
    src.close()
    copied = time.perf_counter() - start
    with psycopg.connect(url.conninfo, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    total = time.perf_counter() - start
    rows = ", ".join(f"{n:,} {t}" for t, n in counts.items())
    return Fill(
        total, f"COPY {copied:.1f} s ({rows}), then VACUUM ANALYZE {total - copied:.1f} s; indexes and triggers on"
    )


@dataclasses.dataclass(frozen=True)
class Bed:
    """A home with ``n`` approved 4 KiB proposals waiting, its workspace and policy."""

    home: Home
    workspace: Path
    policy: Path
    n: int

    def commit_rate(self) -> tuple[float, str]:
        """Files/s of one committer pass (only the pass is timed), checked; and how it was opened:
        ``commit.run.session`` (what ``gatekeeper commit`` opens) or, where that still refuses
        PostgreSQL, the same Committer built here on Store(home.database, keys_dir=...)."""
        try:
            with commit_run.session(self.home, str(self.policy), batch=64, switches=faults.from_env({})) as (c, _):
                return self._timed(c), "commit.run.session"
        except GatekeeperError as exc:
            if "PostgreSQL" not in str(exc):
                raise
        db = self.home.database
        with Store(db, keys_dir=self.home.keys.folder) as store, Reader(db) as reader:
            committer = Committer(self.home, store, reader, PolicySource(str(self.policy), self.home.path), batch=64)
            return self._timed(committer), "Committer built in the bench (commit.run refuses PostgreSQL yet)"

    def _timed(self, committer: Committer) -> float:
        start = time.perf_counter()
        report = committer.run_pass()
        elapsed = time.perf_counter() - start
        created = sum(r.outcome == "created" and r.linked for r in report.results)
        files = sum(1 for _ in self.workspace.rglob("*.md"))
        if created != self.n or files != self.n:
            raise RuntimeError(
                f"the committer created {created} of {self.n} files ({files} on disk): {report.results[:1]}"
            )
        return self.n / elapsed


def approved_bed(root: Path, url: PostgresUrl | None, n: int) -> Bed:
    """A fresh home (SQLite, or on ``url``) with reviewer alice and ``n`` approved 4 KiB creates."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    home = make_home(root / "home") if url is None else pg_home(root / "home", url)
    workspace = root / "workspace"
    workspace.mkdir()
    policy = root / "policy.yaml"
    policy.write_text(POLICY.format(workspace=workspace))
    db: Database = home.database
    with Store(db, keys_dir=home.keys.folder) as store:
        store.add_reviewer("alice", REVIEWER_HASH)
        for i in range(n):
            path = f"bench/d{i % 8}/f{i}.md"
            content = (f"{i}:".encode() + os.urandom(FILE_BYTES))[:FILE_BYTES]
            p = store.propose(
                ProposalDraft(
                    server="notes",
                    tool="create_note",
                    arguments={"path": path, "n": i},
                    workspace=str(workspace),
                    path=path,
                    content=content,
                    policy_digest="0" * 64,
                    expires_at=format_ts(utc_now() + timedelta(hours=1)),
                    session_id="bench",
                )
            )
            proof = PasswordProof(REVIEWER_PASSWORD)
            store.decide(p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path=path, proof=proof)
    return Bed(home, workspace, policy, n)
