"""The audit hash chain: hash = sha256(prev_hash ‖ canonical event), starting from 64 zeros.

The canonical event is the canonical JSON of ``{actor, at, kind, payload, proposal_id, seq}``
with ``payload`` as an object. ``event_message`` builds those bytes by concatenation from the
stored columns (``payload`` is already canonical JSON text), which keeps ``audit verify``
fast; tests/test_chain.py proves it equals ``canonical_json`` of the dict.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

GENESIS = "0" * 64

_dump = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def event_message(seq: int, at: str, kind: str, actor: str, proposal_id: str | None, payload: str) -> bytes:
    return (
        f'{{"actor":{_dump(actor)},"at":{_dump(at)},"kind":{_dump(kind)},"payload":{payload},'
        f'"proposal_id":{_dump(proposal_id)},"seq":{int(seq)}}}'
    ).encode()


def event_hash(prev_hash: str, seq: int, at: str, kind: str, actor: str, proposal_id: str | None, payload: str) -> str:
    h = hashlib.sha256(prev_hash.encode("ascii"))
    h.update(event_message(seq, at, kind, actor, proposal_id, payload))
    return h.hexdigest()


EventRow = tuple[int, str, str, str, "str | None", str, str, str]
"""(seq, at, kind, actor, proposal_id, payload, prev_hash, hash), the column order of audit_event."""


@dataclass(frozen=True)
class ChainProblem:
    seq: int
    reason: str
    saved_head: bool = False  # True: the chain verifies, but not against the head kept elsewhere


@dataclass(frozen=True)
class ChainReport:
    count: int
    head_seq: int
    head_hash: str
    problem: ChainProblem | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify_rows(rows: Iterable[EventRow], after_seq: int = 0, after_hash: str = GENESIS) -> ChainReport:
    """Walk rows in seq order; stop at the first row that breaks the chain.

    By default from the first event; given a head already verified (``after_seq``, ``after_hash``),
    only the rows after it, which must continue from it (the review page's incremental check).
    ``count`` is the number of rows verified by this call.
    """
    prev, expected_seq, count = after_hash, after_seq + 1, 0
    sha256 = hashlib.sha256
    for seq, at, kind, actor, proposal_id, payload, prev_hash, stored in rows:
        if seq != expected_seq:
            what = "missing" if seq > expected_seq else "duplicated or out of order"
            return ChainReport(count, expected_seq - 1, prev, ChainProblem(expected_seq, f"event {what}"))
        if prev_hash != prev:
            return ChainReport(count, seq - 1, prev, ChainProblem(seq, "prev_hash does not match the event before"))
        try:
            message = event_message(seq, at, kind, actor, proposal_id, payload)
        except (TypeError, ValueError) as exc:
            return ChainReport(count, seq - 1, prev, ChainProblem(seq, f"row cannot be encoded: {exc}"))
        h = sha256(prev.encode("ascii"))
        h.update(message)
        if h.hexdigest() != stored:
            return ChainReport(count, seq - 1, prev, ChainProblem(seq, "hash does not match the row's contents"))
        prev, expected_seq, count = stored, seq + 1, count + 1
    return ChainReport(count, expected_seq - 1, prev, None)


class Fetching(Protocol):
    """A DB-API cursor, as far as ``batched`` needs one."""

    def fetchmany(self, size: int = ...) -> list[Any]: ...


def batched(cursor: Fetching, size: int = 10_000) -> Iterator[EventRow]:
    """Rows from a DB-API cursor in batches (``fetchmany``), without holding all in memory."""
    fetch = cursor.fetchmany
    while rows := fetch(size):
        yield from rows
