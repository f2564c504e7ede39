"""The one door through which state changes: each method is one BEGIN IMMEDIATE transaction
that writes its rows and its audit event together, or nothing at all.

No MCP, no HTTP here. Refusals (a forged approval, a second decision) are recorded as events
in a transaction of their own that commits, and then raised to the caller.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from gatekeeper import signing
from gatekeeper.canonical import canonical_json, new_id, now_ts, sha256_hex
from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.store import events as ev
from gatekeeper.store.bounded import bounded
from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.engine import make_engine
from gatekeeper.store.schema import OUTCOMES, VERDICTS, Reviewer
from gatekeeper.store.version import check_schema


@lru_cache(maxsize=64)
def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"


class Tx:
    """One BEGIN IMMEDIATE transaction on the pooled sqlite3 connection.

    Writes use plain DB-API calls: through SQLAlchemy Core a proposal cost ~0.4 ms more Python
    per transaction than its own fsync, which halved the durable rate (bench/). The tables are
    still the SQLModel ones, migrated by Alembic.
    """

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cur = cursor

    def first(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> tuple[Any, ...] | None:
        return self._cur.execute(sql, params).fetchone()

    def all(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        return self._cur.execute(sql, params).fetchall()

    def run(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> None:
        self._cur.execute(sql, params)

    def insert(self, table: str, row: dict[str, Any]) -> None:
        self._cur.execute(_insert_sql(table, tuple(row)), row)


@dataclass(frozen=True)
class Event:
    seq: int
    at: str
    kind: str
    actor: str
    proposal_id: str | None
    payload: str
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class ProposalDraft:
    """Everything the proxy knows about a write call once policy has turned it into a path and bytes."""

    server: str
    tool: str
    arguments: Any  # the exact argument object received (JSON value)
    workspace: str
    path: str
    content: bytes
    policy_digest: str
    expires_at: str
    encoding: str = "text"
    client_name: str | None = None
    client_version: str | None = None
    protocol_version: str | None = None
    session_id: str | None = None
    # The workspace root's resolved real path when the proposal was made: the committer refuses
    # if the root resolves elsewhere by then. None: unknown (then the workspace itself must be real).
    workspace_real: str | None = None


@dataclass(frozen=True)
class Proposed:
    id: str
    created: bool  # False: an identical pending proposal already existed and is returned
    sha256: str
    size: int
    expires_at: str


class Store:
    """A Gatekeeper database: opening checks the schema; writes go through the methods below."""

    def __init__(self, db_path: Path, *, check: bool = True) -> None:
        self.db_path = Path(db_path)
        if check:
            check_schema(self.db_path)
        self.writer: Engine = make_engine(self.db_path)

    def close(self) -> None:
        self.writer.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on any exception)."""
        raw = self.writer.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(cur)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
        finally:
            raw.close()  # back to the pool, still open

    # -- the audit chain -------------------------------------------------------------------

    @staticmethod
    def _append(conn: Tx, kind: str, actor: str, proposal_id: str | None, payload: dict[str, Any]) -> Event:
        last = conn.first("SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1")
        seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
        at = now_ts()
        text = canonical_json(payload)
        digest = event_hash(prev, seq, at, kind, actor, proposal_id, text)
        conn.insert(
            "audit_event",
            dict(
                seq=seq,
                at=at,
                kind=kind,
                actor=actor,
                proposal_id=proposal_id,
                payload=text,
                prev_hash=prev,
                hash=digest,
            ),
        )
        return Event(seq, at, kind, actor, proposal_id, text, prev, digest)

    def append_event(
        self, kind: str, actor: str, payload: dict[str, Any] | None = None, proposal_id: str | None = None
    ) -> Event:
        """Record something that changed no other table: a refusal, a denied tool, ``init``."""
        with self.transaction() as conn:
            return self._append(conn, kind, actor, proposal_id, payload or {})

    # -- proposals ---------------------------------------------------------------------------

    def propose(self, draft: ProposalDraft, actor: str = "proxy") -> Proposed:
        """Record a proposal, or return the identical one still pending (agents retry)."""
        if draft.encoding not in ("text", "base64"):
            raise InvalidInput(f"unknown encoding {draft.encoding!r}", "use 'text' or 'base64'")
        arguments = canonical_json(draft.arguments, allow_floats=True)
        args_sha = sha256_hex(arguments.encode("utf-8"))
        digest = sha256_hex(draft.content)
        with self.transaction() as conn:
            now = now_ts()
            existing = conn.first(
                "SELECT p.id, p.expires_at FROM proposal p WHERE p.server = ? AND p.tool = ? "
                "AND p.args_sha256 = ? AND p.path = ? AND p.sha256 = ? AND p.expires_at > ? "
                "AND p.workspace = ? AND p.workspace_real IS ? "
                "AND NOT EXISTS (SELECT 1 FROM decision d WHERE d.proposal_id = p.id) "
                "ORDER BY p.created_at DESC LIMIT 1",
                (draft.server, draft.tool, args_sha, draft.path, digest, now, draft.workspace, draft.workspace_real),
            )
            if existing:
                self._append(
                    conn,
                    ev.PROPOSAL_REPEATED,
                    actor,
                    existing[0],
                    {"session_id": draft.session_id, "args_sha256": args_sha},
                )
                return Proposed(existing[0], False, digest, len(draft.content), existing[1])
            pid = new_id()
            conn.insert(
                "proposal",
                dict(
                    id=pid,
                    created_at=now,
                    server=draft.server,
                    tool=draft.tool,
                    arguments=arguments,
                    args_sha256=args_sha,
                    workspace=draft.workspace,
                    path=draft.path,
                    content=draft.content,
                    sha256=digest,
                    size=len(draft.content),
                    encoding=draft.encoding,
                    client_name=draft.client_name,
                    client_version=draft.client_version,
                    protocol_version=draft.protocol_version,
                    session_id=draft.session_id,
                    policy_digest=draft.policy_digest,
                    expires_at=draft.expires_at,
                    workspace_real=draft.workspace_real,
                ),
            )
            self._append(
                conn,
                ev.PROPOSAL_CREATED,
                actor,
                pid,
                {
                    "server": draft.server,
                    "tool": draft.tool,
                    "path": draft.path,
                    "sha256": digest,
                    "size": len(draft.content),
                    "args_sha256": args_sha,
                    "expires_at": draft.expires_at,
                    "client": draft.client_name,
                    "client_version": draft.client_version,
                    "protocol_version": draft.protocol_version,
                    "session_id": draft.session_id,
                    "policy_digest": draft.policy_digest,
                    "workspace_real": draft.workspace_real,
                },
            )
            return Proposed(pid, True, digest, len(draft.content), draft.expires_at)

    # -- decisions ---------------------------------------------------------------------------

    def decide(
        self,
        proposal_id: str,
        *,
        verdict: str,
        reviewer: str,
        sha256: str,
        path: str,
        key: bytes,
        reason: str | None = None,
        actor: str | None = None,
    ) -> Event:
        """Approve or reject exactly the proposal the reviewer saw (its sha256 and path).

        Every refusal is an audit event and then a ``Conflict`` / ``NotFound`` / ``InvalidInput``.
        """
        actor = actor or f"reviewer:{reviewer}"
        reason = (reason or "").strip() or None
        with self.transaction() as conn:
            refusal, error = self._decision_refusal(conn, proposal_id, verdict, reviewer, sha256, path, reason)
            if refusal is None:
                decided_at = now_ts()
                row = conn.first("SELECT workspace_real FROM proposal WHERE id = ?", (proposal_id,))
                workspace_real = row[0] if row else None
                signature = signing.sign(
                    key,
                    signing.decision_message(
                        proposal_id=proposal_id,
                        verdict=verdict,
                        reviewer=reviewer,
                        reason=reason,
                        sha256=sha256,
                        path=path,
                        decided_at=decided_at,
                        workspace_real=workspace_real,
                    ),
                )
                try:
                    conn.insert(
                        "decision",
                        dict(
                            proposal_id=proposal_id,
                            verdict=verdict,
                            reviewer=reviewer,
                            reason=reason,
                            sha256=sha256,
                            path=path,
                            decided_at=decided_at,
                            signature=signature,
                        ),
                    )
                except sqlite3.IntegrityError:  # a racing decision won; the UNIQUE index is the last word
                    refusal, error = "already decided", Conflict(f"proposal {proposal_id} is already decided")
                else:
                    return self._append(
                        conn,
                        ev.DECISION,
                        actor,
                        proposal_id,
                        {
                            "verdict": verdict,
                            "reviewer": reviewer,
                            "reason": reason,
                            "sha256": sha256,
                            "path": path,
                            "signature": signature,
                        },
                    )
            # Nothing else was written in this transaction: the refusal event commits alone.
            self._append(
                conn,
                ev.DECISION_REFUSED,
                actor,
                proposal_id,
                # sha256 and path are what was posted: bounded, like every refusal's fields.
                bounded({"verdict": verdict, "reviewer": reviewer, "why": refusal, "sha256": sha256, "path": path}),
            )
        assert error is not None
        raise error

    @staticmethod
    def _decision_refusal(
        conn: Tx,
        proposal_id: str,
        verdict: str,
        reviewer: str,
        sha256: str,
        path: str,
        reason: str | None,
    ) -> tuple[str | None, Exception | None]:
        if verdict not in VERDICTS:
            return "bad verdict", InvalidInput(f"unknown verdict {verdict!r}", "use 'approved' or 'rejected'")
        if verdict == "rejected" and not reason:
            return "no reason", InvalidInput("a rejection needs a reason", "say what the agent should change")
        row = conn.first("SELECT sha256, path, expires_at FROM proposal WHERE id = ?", (proposal_id,))
        if row is None:
            return "no such proposal", NotFound(f"no proposal {proposal_id}")
        who = conn.first("SELECT disabled_at FROM reviewer WHERE name = ?", (reviewer,))
        if who is None or who[0] is not None:
            return "reviewer unknown or disabled", Conflict(f"reviewer {reviewer!r} is unknown or disabled")
        if conn.first("SELECT 1 FROM decision WHERE proposal_id = ?", (proposal_id,)):
            return "already decided", Conflict(f"proposal {proposal_id} is already decided")
        if sha256 != row[0] or path != row[1]:
            return "digest or path mismatch", Conflict(
                f"the approval names sha256 {sha256[:12]}… at {path!r}, but proposal {proposal_id} "
                f"is sha256 {row[0][:12]}… at {row[1]!r}",
                "reload the proposal page and decide on what it shows now",
            )
        if verdict == "approved" and row[2] <= now_ts():
            return "expired", Conflict(f"proposal {proposal_id} expired at {row[2]}", "ask the agent to propose again")
        return None, None

    # -- commits -----------------------------------------------------------------------------

    def record_commit_intent(self, proposal_id: str, actor: str = "committer") -> Event:
        """Say, durably, that the file step for this approved proposal is about to run."""
        with self.transaction() as conn:
            row = conn.first(
                "SELECT p.path, p.sha256, d.verdict, c.outcome FROM proposal p "
                "LEFT JOIN decision d ON d.proposal_id = p.id "
                "LEFT JOIN commit_record c ON c.proposal_id = p.id WHERE p.id = ?",
                (proposal_id,),
            )
            if row is None:
                raise NotFound(f"no proposal {proposal_id}")
            if row[2] != "approved":
                raise Conflict(f"proposal {proposal_id} is not approved")
            if row[3] is not None:
                raise Conflict(f"proposal {proposal_id} already has outcome {row[3]!r}")
            return self._append(conn, ev.COMMIT_INTENT, actor, proposal_id, {"path": row[0], "sha256": row[1]})

    def record_commit_outcome(
        self,
        proposal_id: str,
        outcome: str,
        *,
        detail: str = "",
        observed_sha256: str | None = None,
        final_path: str | None = None,
        actor: str = "committer",
    ) -> Event:
        """The one outcome of an approved proposal; a second one is a ``Conflict``."""
        if outcome not in OUTCOMES:
            raise InvalidInput(f"unknown outcome {outcome!r}", f"use one of {', '.join(OUTCOMES)}")
        with self.transaction() as conn:
            try:
                conn.insert(
                    "commit_record",
                    dict(
                        proposal_id=proposal_id,
                        outcome=outcome,
                        observed_sha256=observed_sha256,
                        final_path=final_path,
                        detail=detail,
                        at=now_ts(),
                    ),
                )
            except sqlite3.IntegrityError as exc:
                if "UNIQUE" in str(exc):
                    raise Conflict(f"proposal {proposal_id} already has an outcome") from None
                if "FOREIGN KEY" in str(exc):
                    raise NotFound(f"no proposal {proposal_id}") from None
                raise
            return self._append(
                conn,
                ev.COMMIT_OUTCOME,
                actor,
                proposal_id,
                {
                    "outcome": outcome,
                    "observed_sha256": observed_sha256,
                    "final_path": final_path,
                    "detail": detail,
                },
            )

    # -- reviewers ---------------------------------------------------------------------------

    def add_reviewer(self, name: str, password_hash: str, actor: str = "cli") -> Event:
        with self.transaction() as conn:
            if conn.first("SELECT 1 FROM reviewer WHERE name = ?", (name,)):
                raise Conflict(f"reviewer {name!r} already exists", "pick another name")
            conn.insert("reviewer", {"name": name, "password_hash": password_hash, "created_at": now_ts()})
            return self._append(conn, ev.REVIEWER_ADDED, actor, None, {"reviewer": name})

    def disable_reviewer(self, name: str, actor: str = "cli") -> Event:
        with self.transaction() as conn:
            row = conn.first("SELECT disabled_at FROM reviewer WHERE name = ?", (name,))
            if row is None:
                raise NotFound(f"no reviewer {name!r}", "`gatekeeper reviewer list` shows them")
            if row[0] is not None:
                raise Conflict(f"reviewer {name!r} is already disabled (since {row[0]})")
            conn.run("UPDATE reviewer SET disabled_at = ? WHERE name = ?", (now_ts(), name))
            ended = self._end_sessions(conn, name)
            return self._append(conn, ev.REVIEWER_DISABLED, actor, None, {"reviewer": name, "sessions_ended": ended})

    def set_reviewer_password(self, name: str, password_hash: str, actor: str = "cli") -> Event:
        with self.transaction() as conn:
            row = conn.first("SELECT disabled_at FROM reviewer WHERE name = ?", (name,))
            if row is None:
                raise NotFound(f"no reviewer {name!r}", "`gatekeeper reviewer list` shows them")
            conn.run("UPDATE reviewer SET password_hash = ? WHERE name = ?", (password_hash, name))
            # A new password is often set because the old one leaked: every session that the old
            # one opened ends with it, in the same transaction (the page checks ended_at each request).
            ended = self._end_sessions(conn, name)
            return self._append(conn, ev.REVIEWER_PASSWORD, actor, None, {"reviewer": name, "sessions_ended": ended})

    @staticmethod
    def _end_sessions(conn: Tx, name: str) -> int:
        """End every open review session of ``name``; return how many were open."""
        row = conn.first("SELECT count(*) FROM review_session WHERE reviewer = ? AND ended_at IS NULL", (name,))
        conn.run("UPDATE review_session SET ended_at = ? WHERE reviewer = ? AND ended_at IS NULL", (now_ts(), name))
        return int(row[0]) if row else 0

    def reviewer(self, name: str) -> Reviewer | None:
        with self.transaction() as conn:
            row = conn.first(
                "SELECT name, password_hash, created_at, disabled_at FROM reviewer WHERE name = ?", (name,)
            )
        return Reviewer(name=row[0], password_hash=row[1], created_at=row[2], disabled_at=row[3]) if row else None

    # -- tool definition pins ----------------------------------------------------------------

    def observe_tools(self, server: str, definitions: dict[str, tuple[str, str]], actor: str = "proxy") -> set[str]:
        """Record the definitions a downstream server lists; return the tools whose pin matches.

        ``definitions`` maps tool -> (digest, canonical definition JSON). A tool seen for the
        first time is pinned to what it is now; a tool whose definition differs from its pin is
        withheld (absent from the result) until ``accept_tool_changes``, and the change is an event.
        """
        matching: set[str] = set()
        with self.transaction() as conn:
            now = now_ts()
            for tool, (digest, definition) in sorted(definitions.items()):
                live = conn.first(
                    "SELECT digest FROM tool_definition WHERE server = ? AND tool = ? "
                    "ORDER BY last_seen_at DESC LIMIT 1",
                    (server, tool),
                )
                conn.run(
                    "INSERT INTO tool_definition (server, tool, digest, definition, first_seen_at, last_seen_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (server, tool, digest) DO UPDATE SET last_seen_at = ?",
                    (server, tool, digest, definition, now, now, now),
                )
                pinned = conn.first(
                    "SELECT digest FROM tool_acceptance WHERE server = ? AND tool = ? ORDER BY id DESC LIMIT 1",
                    (server, tool),
                )
                if pinned is None:
                    conn.insert(
                        "tool_acceptance",
                        {"server": server, "tool": tool, "digest": digest, "accepted_at": now, "actor": actor},
                    )
                    self._append(conn, ev.TOOL_PINNED, actor, None, {"server": server, "tool": tool, "digest": digest})
                    matching.add(tool)
                elif pinned[0] == digest:
                    matching.add(tool)
                elif live is None or live[0] != digest:  # a change, not the same change seen again
                    self._append(
                        conn,
                        ev.TOOL_DEFINITION_CHANGED,
                        actor,
                        None,
                        {"server": server, "tool": tool, "pinned": pinned[0], "seen": digest},
                    )
        return matching

    def pending_tool_changes(self) -> list[dict[str, str]]:
        """Tools whose newest seen definition is not the one they are pinned to."""
        with self.transaction() as conn:
            rows = conn.all(
                "SELECT d.server, d.tool, d.digest, d.definition, a.digest FROM tool_definition d "
                "JOIN tool_acceptance a ON a.id = (SELECT max(id) FROM tool_acceptance x "
                "WHERE x.server = d.server AND x.tool = d.tool) "
                "WHERE d.last_seen_at = (SELECT max(last_seen_at) FROM tool_definition y "
                "WHERE y.server = d.server AND y.tool = d.tool) AND d.digest != a.digest "
                "ORDER BY d.server, d.tool"
            )
        return [{"server": r[0], "tool": r[1], "digest": r[2], "definition": r[3], "pinned": r[4]} for r in rows]

    def accept_tool_changes(self, actor: str = "cli") -> list[dict[str, str]]:
        """Pin every changed tool to its newest definition; each acceptance is an event."""
        changes = self.pending_tool_changes()
        with self.transaction() as conn:
            now = now_ts()
            for change in changes:
                conn.insert(
                    "tool_acceptance",
                    {
                        "server": change["server"],
                        "tool": change["tool"],
                        "digest": change["digest"],
                        "accepted_at": now,
                        "actor": actor,
                    },
                )
                self._append(
                    conn,
                    ev.TOOL_CHANGE_ACCEPTED,
                    actor,
                    None,
                    {
                        "server": change["server"],
                        "tool": change["tool"],
                        "from": change["pinned"],
                        "to": change["digest"],
                    },
                )
        return changes

    # -- commits, several proposals per transaction (the committer) ---------------------------

    def record_commit_intents(
        self, proposal_ids: list[str], actor: str = "committer", before_commit: Any = None
    ) -> dict[str, str]:
        """In one transaction, append the ``commit_intent`` event of each proposal about to get its file step.

        Per id: ``"new"`` (appended now), ``"existing"`` (an earlier or concurrent attempt already
        wrote one: finish it without a second), ``"done"`` (it has an outcome: skip it) or
        ``"not approved"``. ``before_commit`` (no arguments) runs inside the transaction just
        before COMMIT, so crash tests can kill the process there.
        """
        states: dict[str, str] = {}
        with self.transaction() as conn:
            known: dict[str, tuple[Any, ...]] = {}
            # '+e.kind' keeps SQLite on the proposal_id index: on the kind index, each lookup scanned
            # every intent ever written (a batch of 64 took 13 ms after 1,000 commits, growing).
            for start in range(0, len(proposal_ids), 500):  # under SQLite's bound-parameter limit
                chunk = proposal_ids[start : start + 500]
                for row in conn.all(
                    "SELECT p.id, p.path, p.sha256, d.verdict, c.outcome, EXISTS (SELECT 1 FROM audit_event e "
                    "WHERE e.proposal_id = p.id AND +e.kind = ?) FROM proposal p "
                    "LEFT JOIN decision d ON d.proposal_id = p.id "
                    f"LEFT JOIN commit_record c ON c.proposal_id = p.id WHERE p.id IN ({', '.join('?' * len(chunk))})",
                    (ev.COMMIT_INTENT, *chunk),
                ):
                    known[row[0]] = row[1:]
            for pid in proposal_ids:
                row = known.get(pid)
                if row is None or row[2] != "approved":
                    states[pid] = "not approved"
                elif row[3] is not None:
                    states[pid] = "done"
                elif row[4] or states.get(pid) == "new":
                    states[pid] = "existing"
                else:
                    self._append(conn, ev.COMMIT_INTENT, actor, pid, {"path": row[0], "sha256": row[1]})
                    states[pid] = "new"
            if before_commit is not None:
                before_commit()
        return states

    def record_commit_outcomes(
        self, outcomes: list[dict[str, Any]], actor: str = "committer", after_row: Any = None
    ) -> dict[str, bool]:
        """In one transaction, each outcome row with its ``commit_outcome`` event.

        Each item has ``proposal_id``, ``outcome`` and optionally ``detail``, ``observed_sha256``,
        ``final_path``. A proposal that already has an outcome (another committer was faster) is
        skipped: False in the result, nothing written for it. ``after_row(proposal_id)`` runs
        between a row and its event, inside the transaction (crash tests).
        """
        for item in outcomes:
            if item["outcome"] not in OUTCOMES:
                raise InvalidInput(f"unknown outcome {item['outcome']!r}", f"use one of {', '.join(OUTCOMES)}")
        recorded: dict[str, bool] = {}
        with self.transaction() as conn:
            ids = [item["proposal_id"] for item in outcomes]
            state: dict[str, tuple[Any, ...]] = {}
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                for row in conn.all(
                    "SELECT d.proposal_id, d.verdict, c.outcome FROM decision d "
                    "LEFT JOIN commit_record c ON c.proposal_id = d.proposal_id "
                    f"WHERE d.proposal_id IN ({', '.join('?' * len(chunk))})",
                    chunk,
                ):
                    state[row[0]] = row[1:]
            for item in outcomes:
                pid = item["proposal_id"]
                verdict, outcome = state.get(pid, (None, None))
                if outcome is not None or recorded.get(pid):
                    recorded[pid] = False
                    continue
                if verdict != "approved":
                    raise Conflict(f"proposal {pid} is not approved; it cannot have a commit outcome")
                fields = {
                    "outcome": item["outcome"],
                    "observed_sha256": item.get("observed_sha256"),
                    "final_path": item.get("final_path"),
                    "detail": item.get("detail") or "",
                }
                conn.insert("commit_record", {"proposal_id": pid, **fields, "at": now_ts()})
                if after_row is not None:
                    after_row(pid)
                self._append(conn, ev.COMMIT_OUTCOME, actor, pid, fields)
                recorded[pid] = True
        return recorded
