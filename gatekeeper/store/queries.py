"""Read-only queries. A proposal's status is computed here from which rows exist, never stored.

pending   no decision, not expired         rejected  decision says so
expired   no decision, past expires_at     approved  approved, no outcome yet
committed outcome created/applied/deleted   conflict / refused / failed: that outcome
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from gatekeeper.canonical import now_ts
from gatekeeper.store.backends import backend_for, lost
from gatekeeper.store.chain import GENESIS, EventRow, Fetching
from gatekeeper.store.events import CHECKPOINT, COMMIT_INTENT
from gatekeeper.store.target import Database

STATUSES = ("pending", "expired", "rejected", "approved", "committed", "conflict", "refused", "failed")

STATUS_SQL = """CASE
    WHEN c.outcome IN ('created', 'applied', 'deleted') THEN 'committed'
    WHEN c.outcome IS NOT NULL THEN c.outcome
    WHEN d.verdict IS NOT NULL THEN d.verdict
    WHEN p.expires_at <= :now THEN 'expired'
    ELSE 'pending' END"""

# For each status, a WHERE clause equivalent to the CASE above. Pending uses the expires_at
# index. The rare ones wrap the joined column in coalesce() so SQLite keeps the LEFT JOIN and walks
# created_at newest first, stopping at LIMIT, instead of scanning and sorting every match (bench/).
# Committed (most rows) names c.outcome bare: SQLite still walks created_at (an IN list), and
# PostgreSQL sees the column's statistics; behind coalesce() it expected few matches and sorted them
# all (tests/test_postgres_plans.py).
STATUS_WHERE = {
    "pending": "d.proposal_id IS NULL AND p.expires_at > :now",
    "expired": "d.proposal_id IS NULL AND p.expires_at <= :now",
    "rejected": "coalesce(d.verdict, '') = 'rejected' AND c.proposal_id IS NULL",
    "approved": "coalesce(d.verdict, '') = 'approved' AND c.proposal_id IS NULL",
    "committed": "c.outcome IN ('created', 'applied', 'deleted')",
    "conflict": "coalesce(c.outcome, '') = 'conflict'",
    "refused": "coalesce(c.outcome, '') = 'refused'",
    "failed": "coalesce(c.outcome, '') = 'failed'",
}

# An approved proposal as the committer checks it (``commit.checks.Candidate``): the proposal, its
# decision with the reviewer's proof (0007), and the passkey the assertion names, if any.
CANDIDATE_SELECT = (
    "SELECT p.id, p.created_at, p.server, p.tool, p.workspace, p.path, p.sha256, p.size, "
    "d.id AS decision_id, d.verdict, d.reviewer, d.reason, d.sha256 AS decision_sha256, "
    "d.path AS decision_path, d.decided_at, d.signature, p.workspace_real, p.mode, p.base_sha256, "
    "p.base_size, p.client_name, d.mode AS decision_mode, d.base_sha256 AS decision_base_sha256, "
    "d.method, d.nonce, d.assertion, d.assertion_index, d.assertion_digests, d.key_id, "
    "k.credential_id AS passkey_credential, k.reviewer AS passkey_reviewer, k.public_key AS passkey_public_key, "
    "k.label AS passkey_label, k.created_at AS passkey_created_at, k.removed_at AS passkey_removed_at, "
    # '+e.kind' keeps SQLite on the proposal_id index: on the kind index, each lookup scanned
    # every intent ever written (a batch of 64 took 13 ms after 1,000 commits, growing).
    "EXISTS (SELECT 1 FROM audit_event e WHERE e.proposal_id = p.id AND +e.kind = ?) AS has_intent "
    "FROM decision d JOIN proposal p ON p.id = d.proposal_id "
    "LEFT JOIN commit_record c ON c.proposal_id = d.proposal_id "
    "LEFT JOIN passkey k ON d.assertion IS NOT NULL AND k.credential_id = json_extract(d.assertion, '$.credential_id')"
)

# The approvals short of a rule's ``approvals: N`` (migration 0009), named as ``CANDIDATE_SELECT``
# names a decision's columns, so the committer checks each exactly as it checks the decision.
APPROVALS_SELECT = (
    "SELECT a.proposal_id, a.id AS approval_id, a.reviewer, a.reason, a.sha256 AS decision_sha256, "
    "a.path AS decision_path, a.decided_at, a.signature, a.mode AS decision_mode, "
    "a.base_sha256 AS decision_base_sha256, a.method, a.nonce, a.assertion, a.assertion_index, "
    "a.assertion_digests, a.key_id, "
    "k.credential_id AS passkey_credential, k.reviewer AS passkey_reviewer, k.public_key AS passkey_public_key, "
    "k.label AS passkey_label, k.created_at AS passkey_created_at, k.removed_at AS passkey_removed_at "
    "FROM approval a "
    "LEFT JOIN passkey k ON a.assertion IS NOT NULL AND k.credential_id = json_extract(a.assertion, '$.credential_id')"
)

_LIST_COLUMNS = (
    "p.id, " + STATUS_SQL + " AS status, p.server, p.tool, p.path, p.size, p.sha256, p.created_at, "
    "p.expires_at, d.reviewer, d.reason, c.final_path, p.mode, p.base_size"
)
_FROM = "FROM proposal p LEFT JOIN decision d ON d.proposal_id = p.id LEFT JOIN commit_record c ON c.proposal_id = p.id"


@dataclass(frozen=True)
class ProposalRow:
    id: str
    status: str
    server: str
    tool: str
    path: str
    size: int
    sha256: str
    created_at: str
    expires_at: str
    reviewer: str | None
    reason: str | None
    final_path: str | None
    mode: str = "create"
    base_size: int | None = None  # a change's file size before it (None for a create)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Reader:
    """A read-only connection (SQLite ``mode=ro``; PostgreSQL a read-only session): ``audit`` can
    never write, even by mistake. On SQLite ``_q`` is the connection's own ``execute``."""

    def __init__(self, db_path: Database) -> None:
        self._backend = backend_for(db_path)
        self.db_path = self._backend.database
        self._conn = self._backend.connect_reader()
        self._q: Callable[..., Any] = self._conn.execute if self._backend.translate is None else self._translated

    def _translated(self, sql: str, params: tuple[Any, ...] | dict[str, Any] | list[Any] = ()) -> Any:
        """PostgreSQL: the SQLite-dialect query rewritten; a lost connection reopened (once, outside a
        snapshot: a read is idempotent), else reported as ``DatabaseUnreachable`` and reopened next time."""
        assert self._backend.translate is not None
        text = self._backend.translate(sql)
        for last in (False, True):
            if not self._backend.reusable(self._conn):  # lost just now, or while the server was down
                self._conn.close()
                self._conn = self._backend.connect_reader()
            inside = self._backend.in_transaction(self._conn)  # a snapshot cannot be resumed elsewhere
            try:
                return self._conn.execute(text, params)
            except self._backend.lost_errors as exc:
                if last or inside or self._backend.reusable(self._conn):
                    raise lost(self.db_path, exc) from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- proposals ---------------------------------------------------------------------------

    def proposals(
        self,
        *,
        status: str | None = None,
        server: str | None = None,
        since: str | None = None,
        limit: int | None = 50,
        now: str | None = None,
    ) -> list[ProposalRow]:
        """Newest first."""
        where: list[str] = []
        params: dict[str, Any] = {"now": now or now_ts()}
        if status is not None:
            where.append(STATUS_WHERE[status])
        if server is not None:
            where.append("p.server = :server")
            params["server"] = server
        if since is not None:
            where.append("p.created_at >= :since")
            params["since"] = since
        sql = f"SELECT {_LIST_COLUMNS} {_FROM}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY p.created_at DESC, p.id DESC"
        if limit is not None:
            sql += " LIMIT :limit"
            params["limit"] = limit
        return [ProposalRow(*row) for row in self._q(sql, params)]

    def proposal(self, proposal_id: str, now: str | None = None) -> dict[str, Any] | None:
        """Everything about one proposal: its row, decision, outcome and events."""
        self._q(self._backend.snapshot_begin)  # one snapshot for all the reads below
        try:
            cur = self._q(
                f"SELECT p.*, {STATUS_SQL} AS status {_FROM} WHERE p.id = :id",
                {"id": proposal_id, "now": now or now_ts()},
            )
            row = cur.fetchone()
            if row is None:
                return None
            result = dict(zip([c[0] for c in cur.description], row, strict=True))
            result["decision"] = self._one("SELECT * FROM decision WHERE proposal_id = ?", proposal_id)
            result["commit"] = self._one("SELECT * FROM commit_record WHERE proposal_id = ?", proposal_id)
            result["events"] = [
                event_dict(r)
                for r in self._q("SELECT * FROM audit_event WHERE proposal_id = ? ORDER BY seq", (proposal_id,))
            ]
            return result
        finally:
            self._q("COMMIT")

    def first(self, sql: str, params: tuple[object, ...] = ()) -> tuple[object, ...] | None:
        """One row of a store module's own query (``reviews``), in the store's SQLite dialect."""
        row: tuple[object, ...] | None = self._q(sql, params).fetchone()
        return row

    def has_proposal(self, proposal_id: str) -> bool:
        return self._q("SELECT 1 FROM proposal WHERE id = ?", (proposal_id,)).fetchone() is not None

    def _one(self, sql: str, *params: Any) -> dict[str, Any] | None:
        cur = self._q(sql, params)
        row = cur.fetchone()
        return dict(zip([c[0] for c in cur.description], row, strict=True)) if row else None

    def proposal_state(self, proposal_id: str, now: str | None = None) -> dict[str, Any] | None:
        """Where one proposal stands: its status and the fields that say why, without its content
        (the proxy re-reads this while an agent waits)."""
        cur = self._q(
            f"SELECT p.id, {STATUS_SQL} AS status, p.workspace, p.path, p.sha256, p.size, p.created_at, "
            "p.expires_at, d.reviewer, d.reason, d.decided_at, c.outcome, c.final_path, c.detail, p.mode, "
            "p.base_sha256, p.base_size "
            f"{_FROM} WHERE p.id = :id",
            {"id": proposal_id, "now": now or now_ts()},
        )
        row = cur.fetchone()
        return dict(zip([c[0] for c in cur.description], row, strict=True)) if row else None

    def pending_count(self) -> int:
        """How many proposals wait for a decision (the review page's badge)."""
        row = self._q(
            "SELECT count(*) FROM proposal p LEFT JOIN decision d ON d.proposal_id = p.id "
            f"WHERE {STATUS_WHERE['pending']}",
            {"now": now_ts()},
        ).fetchone()
        return int(row[0])

    def servers(self) -> list[str]:
        """Every downstream server that ever proposed, for the review page's filter."""
        return [r[0] for r in self._q("SELECT DISTINCT server FROM proposal ORDER BY server")]

    def other_pending(self, proposal_id: str, path: str, workspace: str, limit: int = 20) -> list[dict[str, Any]]:
        """Other pending proposals for the same destination, newest first: approving one makes the rest conflict."""
        cur = self._q(
            "SELECT p.id, p.created_at, p.sha256 FROM proposal p LEFT JOIN decision d ON d.proposal_id = p.id "
            f"WHERE p.path = :path AND p.workspace = :ws AND p.id != :id AND {STATUS_WHERE['pending']} "
            "ORDER BY p.created_at DESC LIMIT :limit",
            {"path": path, "ws": workspace, "id": proposal_id, "now": now_ts(), "limit": limit},
        )
        return [{"id": r[0], "created_at": r[1], "sha256": r[2]} for r in cur]

    def committed_files(self) -> Iterator[tuple[str, str, str, str | None, str, str]]:
        """(proposal id, workspace, path, final_path, sha256, outcome) of the LATEST committed
        proposal per destination, in commit order: what the file should be now. A later approved
        change supersedes an earlier one; outcome ``deleted`` means the file should be absent."""
        yield from self._q(
            "SELECT id, workspace, path, final_path, sha256, outcome FROM ("
            "SELECT p.id, p.workspace, p.path, c.final_path, p.sha256, c.outcome, c.id AS commit_id, "
            "row_number() OVER (PARTITION BY p.workspace, p.path ORDER BY c.id DESC) AS newest "
            "FROM commit_record c JOIN proposal p ON p.id = c.proposal_id "
            "WHERE c.outcome IN ('created', 'applied', 'deleted')) AS latest WHERE newest = 1 ORDER BY commit_id"
        )

    # -- events ------------------------------------------------------------------------------

    def events(
        self,
        *,
        kind: str | None = None,
        proposal_id: str | None = None,
        since: str | None = None,
        after_seq: int = 0,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[EventRow]:
        """In seq order: the first ``limit`` matches, or the newest ``last`` (``audit log -n``)."""
        where = ["seq > :after"]
        params: dict[str, Any] = {"after": after_seq}
        if kind is not None:
            where.append("kind = :kind")
            params["kind"] = kind
        if proposal_id is not None:
            where.append("proposal_id = :pid")
            params["pid"] = proposal_id
        if since is not None:
            where.append("at >= :since")
            params["since"] = since
        sql = "SELECT * FROM audit_event WHERE " + " AND ".join(where) + " ORDER BY seq"
        if last is not None:
            sql = f"SELECT * FROM ({sql} DESC LIMIT {int(last)}) AS tail ORDER BY seq"
        if limit is not None:
            sql += " LIMIT :limit"
            params["limit"] = limit
        return list(self._q(sql, params))

    def all_events(self, since: str | None = None) -> Fetching:
        """Every event (at or after ``since``) in seq order, for ``verify`` and ``export`` to stream
        (use ``chain.batched``)."""
        sql = "SELECT seq, at, kind, actor, proposal_id, payload, prev_hash, hash FROM audit_event"
        where, params = ("", ()) if since is None else (" WHERE at >= ?", (since,))
        cursor: Fetching = self._q(sql + where + " ORDER BY seq", params)
        return cursor

    def head(self) -> tuple[int, str]:
        row = self._q("SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row else (0, GENESIS)

    def checkpoints(self) -> list[tuple[int, str, str | None]]:
        """Every signed checkpoint (``audit.checkpoints``): its seq, its payload, and the stored hash
        of the event at the seq it names (None: no such event any more)."""
        rows = self._q(
            "SELECT e.seq, e.payload, t.hash FROM audit_event e LEFT JOIN audit_event t "
            "ON t.seq = CAST(json_extract(e.payload, '$.seq') AS INTEGER) WHERE e.kind = ? ORDER BY e.seq",
            (CHECKPOINT,),
        ).fetchall()
        return [(int(seq), str(payload), hash_) for seq, payload, hash_ in rows]

    def event_count(self) -> int:
        """Rows in the log, counted apart from the chain (which stops at the first bad row)."""
        return int(self._q("SELECT count(*) FROM audit_event").fetchone()[0])

    def reviewers(self) -> list[dict[str, Any]]:
        cur = self._q("SELECT name, created_at, disabled_at FROM reviewer ORDER BY name")
        return [dict(zip(("name", "created_at", "disabled_at"), r, strict=True)) for r in cur]

    # -- the committer's queue -------------------------------------------------------------------

    def commit_queue(self, after_decision_id: int = 0) -> tuple[int, list[dict[str, Any]]]:
        """Approved proposals without an outcome, oldest first, whose decision id is above
        ``after_decision_id``; and the highest decision id of the same snapshot.

        Decision ids only grow (rows are never deleted), so a committer that has seen every
        decision up to some id need not look below it again: a pass costs the new decisions, not
        the whole history. Content is left out; ``proposal_contents`` fetches it a batch at a time.
        """
        self._q(self._backend.snapshot_begin)
        try:
            high = self._q("SELECT coalesce(max(id), 0) FROM decision").fetchone()[0]
            cur = self._q(
                f"{CANDIDATE_SELECT} WHERE d.id > ? AND d.id <= ? AND d.verdict = 'approved' "
                "AND c.proposal_id IS NULL ORDER BY p.created_at, p.id",
                (COMMIT_INTENT, after_decision_id, high),
            )
            names = [c[0] for c in cur.description]
            rows = [dict(zip(names, row, strict=True)) for row in cur]
        finally:
            self._q("COMMIT")
        return high, rows

    def dicts(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows of a store module's own query as dicts by column name (``store/verifying.py``)."""
        cur = self._q(sql, params)
        names = [c[0] for c in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]

    def approvals(self, proposal_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Each proposal's ``approval`` rows (the first N-1 of ``approvals: N``), oldest first."""
        out: dict[str, list[dict[str, Any]]] = {}
        for start in range(0, len(proposal_ids), 500):
            chunk = proposal_ids[start : start + 500]
            cur = self._q(
                f"{APPROVALS_SELECT} WHERE a.proposal_id IN ({', '.join('?' * len(chunk))}) ORDER BY a.id", chunk
            )
            names = [c[0] for c in cur.description]
            for row in cur:
                item = dict(zip(names, row, strict=True))
                out.setdefault(item["proposal_id"], []).append(item)
        return out

    def proposal_contents(self, proposal_ids: list[str]) -> dict[str, bytes]:
        """The exact stored bytes of each proposal, by id."""
        out: dict[str, bytes] = {}
        for start in range(0, len(proposal_ids), 500):  # stay under SQLite's bound-parameter limit
            chunk = proposal_ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for pid, content in self._q(f"SELECT id, content FROM proposal WHERE id IN ({marks})", chunk):
                out[pid] = bytes(content)
        return out

    def query_plan(self, call: Callable[[], object]) -> list[str]:
        """EXPLAIN QUERY PLAN of the first SELECT that ``call`` runs on this reader (benchmarks check
        that the hot queries stay on their indexes)."""
        seen: list[str] = []
        self._conn.set_trace_callback(seen.append)
        try:
            call()
        finally:
            self._conn.set_trace_callback(None)
        sql = next(q for q in seen if q.lstrip().upper().startswith("SELECT"))
        return [row[3] for row in self._conn.execute("EXPLAIN QUERY PLAN " + sql)]

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes whenever another connection commits (PostgreSQL:
        the chain head's seq, see ``postgres``)."""
        return int(self._q(self._backend.data_version_sql).fetchone()[0])


def event_dict(row: EventRow) -> dict[str, Any]:
    seq, at, kind, actor, proposal_id, payload, prev_hash, digest = row
    return {
        "seq": seq,
        "at": at,
        "kind": kind,
        "actor": actor,
        "proposal_id": proposal_id,
        "payload": payload,
        "prev_hash": prev_hash,
        "hash": digest,
    }
