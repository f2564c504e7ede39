"""The review page's reads: one page of the queue, counts, and what else targets a path.

The SQL lives in ``store.queries.Reader``; these are the names the page's routes call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gatekeeper.cautions import Caution
from gatekeeper.store import cautioned
from gatekeeper.store.queries import ProposalRow, Reader

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
    return reader.pending_count()


def servers(reader: Reader) -> list[str]:
    return reader.servers()


def other_pending_for_path(reader: Reader, proposal_id: str, path: str, workspace: str) -> list[dict[str, Any]]:
    return reader.other_pending(proposal_id, path, workspace)


def cautions(reader: Reader, rows: list[ProposalRow]) -> dict[str, list[Caution]]:
    """The warnings of the pending rows (what a batch could approve), shown in their rows."""
    found = {r.id: cautioned.of(reader.first, r.id) for r in rows if r.status == "pending"}
    return {pid: c for pid, c in found.items() if c}
