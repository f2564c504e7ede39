"""Proposals with a warning (``gatekeeper.content.cautions``) as the store reads them: for the queue's rows,
and for a batch approval, which refuses them whole with an event per proposal.

Bytes over ``LARGE`` are not fetched (the size alone decides), so a batch or a page of 50 rows reads
at most 50 x 2 x 64 KiB; a batch reads its rows in one query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gatekeeper.content.cautions import LARGE, Caution, cautions
from gatekeeper.errors import Conflict
from gatekeeper.store import events as ev
from gatekeeper.store.bounded import bounded
from gatekeeper.store.tx import Tx

First = Callable[[str, tuple[Any, ...]], tuple[Any, ...] | None]  # Tx.first or Reader.first

_COLUMNS = (
    "id, mode, size, base_size, CASE WHEN size <= ? THEN content END, "
    "CASE WHEN coalesce(base_size, 0) <= ? THEN base END, arguments, path, sha256"
)
REFUSED_WHY = "a batch approval would hide its warning: approve it from its own page"


def of(first: First, proposal_id: str) -> list[Caution]:
    """One proposal's warnings ([] for none, or for no such proposal: the decision names that)."""
    row = first(f"SELECT {_COLUMNS} FROM proposal WHERE id = ?", (LARGE, LARGE, proposal_id))
    return [] if row is None else _cautions(row)


def _cautions(row: tuple[Any, ...]) -> list[Caution]:
    _pid, mode, size, base_size, content, base, arguments = row[:7]
    return cautions(
        mode=str(mode),
        size=int(size),
        base_size=None if base_size is None else int(base_size),
        content=None if content is None else bytes(content),
        base=None if base is None else bytes(base),
        arguments=str(arguments),
    )


def refuse_batch(tx: Tx, proposal_ids: Sequence[str], reviewer: str, actor: str) -> Conflict | None:
    """For an approval of several proposals at once: a ``decision_refused`` event for each one with
    a warning, and the error that refuses the whole batch (None when none has one). The caller
    commits the events and raises the error: nothing is approved."""
    marks = ", ".join("?" for _ in proposal_ids)
    rows = tx.all(f"SELECT {_COLUMNS} FROM proposal WHERE id IN ({marks})", (LARGE, LARGE, *proposal_ids))
    by_id = {str(row[0]): row for row in rows}  # one query for the batch, read in the batch's order
    named: list[str] = []
    for pid in proposal_ids:
        row = by_id.get(pid)
        found = [] if row is None else _cautions(row)
        if row is None or not found:
            continue
        path, sha256 = str(row[7]), str(row[8])
        texts = [c.text for c in found]
        named.append(f"{path} ({'; '.join(texts)})")
        payload = {"verdict": "approved", "reviewer": reviewer, "why": REFUSED_WHY, "path": path, "sha256": sha256}
        tx.append_event(ev.DECISION_REFUSED, actor, bounded(payload | {"cautions": texts}), pid)
    if not named:
        return None
    which = (
        f"{len(named)} of the {len(proposal_ids)} selected proposals carry warnings"
        if len(proposal_ids) > 1
        else "the selected proposal carries a warning"
    )
    return Conflict(
        f"Nothing was approved: {which} that approving from the queue would hide: {', '.join(named)}",
        "open each of them and approve it from its own page, where the warning stands beside the content; "
        "untick them to approve the rest together",
    )
