"""The review page's reads: one page of the queue, counts, and what else targets a path.

The SQL lives in ``store.queries.Reader``; these are the names the page's routes call."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from gatekeeper.content.cautions import Caution
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


class Cautions:
    """The warnings of the queue's pending rows (what a batch could approve), shown in their rows.

    A proposal's bytes never change (the store is append-only), so its warnings are worked out once
    per review process and kept by (id, sha256): a page of 50 rows of 64 KiB costs ~0.2 s to read
    and scan the first time, and nothing after. The batch refusal (``store/cautioned.py``) always
    reads the database afresh."""

    def __init__(self, keep: int = 4096) -> None:
        self._keep = keep
        self._seen: OrderedDict[tuple[str, str], list[Caution]] = OrderedDict()
        self._lock = threading.Lock()

    def of_rows(self, reader: Reader, rows: list[ProposalRow]) -> dict[str, list[Caution]]:
        out: dict[str, list[Caution]] = {}
        for r in rows:
            if r.status != "pending":
                continue
            with self._lock:
                found = self._seen.get((r.id, r.sha256))
            if found is None:
                found = cautioned.of(reader.first, r.id)
                with self._lock:
                    self._seen[(r.id, r.sha256)] = found
                    while len(self._seen) > self._keep:
                        self._seen.popitem(last=False)
            if found:
                out[r.id] = found
        return out


cautions = Cautions().of_rows
