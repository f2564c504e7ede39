"""The review page's reads: one page of the queue, counts, and what else targets a path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gatekeeper.canonical import now_ts
from gatekeeper.store.queries import (
    STATUS_WHERE,  # one definition of each status
    ProposalRow,
    Reader,
)

PAGE_SIZE = 50


@dataclass(frozen=True)
class QueuePage:
    rows: list[ProposalRow]
    page: int
    has_next: bool
    pending: int


def queue_page(reader: Reader, *, status: str | None, server: str | None, page: int) -> QueuePage:
    rows = reader.proposals(status=status, server=server, limit=PAGE_SIZE * page + 1)[PAGE_SIZE * (page - 1) :]
    return QueuePage(rows[:PAGE_SIZE], page, len(rows) > PAGE_SIZE, pending_count(reader))


def pending_count(reader: Reader) -> int:
    row = reader.conn.execute(
        f"SELECT count(*) FROM proposal p LEFT JOIN decision d ON d.proposal_id = p.id WHERE {STATUS_WHERE['pending']}",
        {"now": now_ts()},
    ).fetchone()
    return int(row[0])


def servers(reader: Reader) -> list[str]:
    return [r[0] for r in reader.conn.execute("SELECT DISTINCT server FROM proposal ORDER BY server")]


def other_pending_for_path(reader: Reader, proposal_id: str, path: str, workspace: str) -> list[dict[str, Any]]:
    cur = reader.conn.execute(
        "SELECT p.id, p.created_at, p.sha256 FROM proposal p LEFT JOIN decision d ON d.proposal_id = p.id "
        f"WHERE p.path = :path AND p.workspace = :ws AND p.id != :id AND {STATUS_WHERE['pending']} "
        "ORDER BY p.created_at DESC LIMIT 20",
        {"path": path, "ws": workspace, "id": proposal_id, "now": now_ts()},
    )
    return [{"id": r[0], "created_at": r[1], "sha256": r[2]} for r in cur]
