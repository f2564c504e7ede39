"""``audit verify``: recompute the hash chain, and optionally compare committed files on disk.

The chain detects any edited, inserted or removed row except a removed tail; a head kept
elsewhere (``audit head``: its seq and hash) and checked with ``--expect-head`` detects that
too. The log only ever grows, so a saved head must be found *at its seq*: a log that grew since
passes, one that ends before that seq was cut, one with another hash there was rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.store.chain import GENESIS, ChainProblem, ChainReport, EventRow, batched, verify_rows
from gatekeeper.store.queries import Reader
from gatekeeper.store.verifying import outcomes_without_rows, rows_without_outcomes

_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class FileProblem:
    proposal_id: str
    path: str
    problem: str  # "missing", "changed", "present after its deletion", "unreadable: ..."


@dataclass(frozen=True)
class OutcomeProblem:
    proposal_id: str
    problem: str  # an outcome event without its commit_record row, or a row without its event


@dataclass(frozen=True)
class SavedHead:
    """A head kept elsewhere: ``seq`` is None for a bare hash saved by an older Gatekeeper."""

    seq: int | None
    hash: str

    def __str__(self) -> str:
        return self.hash if self.seq is None else f"{self.seq} {self.hash}"


def parse_head(text: str) -> SavedHead:
    """Read what ``audit head`` printed: ``SEQ HASH``, its ``--json`` object, or a bare HASH.

    Raises ``ValueError`` saying which forms are understood.
    """
    raw = text.strip()
    usage = (
        "pass what `gatekeeper audit head` printed: 'SEQ HASH' (e.g. '42 3f9a…'), "
        'its --json form {"seq": 42, "hash": "3f9a…"}, or a bare 64-hex HASH'
    )
    seq: object = None
    if raw.startswith("{"):
        try:
            obj = json.loads(raw)
        except ValueError:
            raise ValueError(f"the saved head is not valid JSON; {usage}") from None
        if not isinstance(obj, dict) or set(obj) != {"seq", "hash"}:
            raise ValueError(f"the saved head's JSON must have exactly 'seq' and 'hash'; {usage}")
        seq, digest = obj["seq"], obj["hash"]
    else:
        parts = raw.split()
        if len(parts) == 2:
            seq, digest = parts
        elif len(parts) == 1:
            digest = parts[0]
        else:
            raise ValueError(f"cannot read the saved head {raw[:80]!r}; {usage}")
    if not isinstance(digest, str) or not _HASH.fullmatch(digest.lower()):
        raise ValueError(f"the saved head's hash {str(digest)[:80]!r} is not 64 hex digits; {usage}")
    if seq is not None:
        if isinstance(seq, str) and seq.isascii() and seq.isdigit():
            seq = int(seq)
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise ValueError(f"the saved head's seq {str(seq)[:40]!r} is not a whole number; {usage}")
    return SavedHead(seq, digest.lower())


def verify_chain(reader: Reader, expect_head: SavedHead | str | None = None) -> ChainReport:
    """Verify every event; with ``expect_head``, also that the saved head is still in the log."""
    if expect_head is None:
        return verify_rows(batched(reader.all_events()))
    saved = parse_head(expect_head) if isinstance(expect_head, str) else expect_head
    found: dict[int, str] = {}  # seq -> stored hash of the row that matters to the saved head

    def tap(rows: Iterable[EventRow]) -> Iterator[EventRow]:
        for row in rows:
            if row[0] == saved.seq or (saved.seq is None and row[7] == saved.hash):
                found[row[0]] = row[7]
            yield row

    report = verify_rows(tap(batched(reader.all_events())))
    return _check_head(report, saved, found)


def _check_head(report: ChainReport, saved: SavedHead, found: dict[int, str]) -> ChainReport:
    """Rows up to ``report.head_seq`` are verified; the saved head must be among them."""
    if saved.seq is None:  # a bare hash: wherever it is, it must be in the verified part
        seq = next((s for s in found if s <= report.head_seq), None)
        if seq is not None or (saved.hash == GENESIS):
            return report
        if report.problem is not None:
            return report  # the chain itself is broken before it: that is the first thing to say
        reason = (
            f"the saved head hash {saved.hash} is at no seq of the log, which ends at seq {report.head_seq}: "
            "events were removed from the end, the log was rewritten, or the head is from another database "
            "(save `audit head`'s whole line, seq and hash, to tell which)"
        )
        return _failed(report, report.head_seq + 1, reason)
    if report.problem is not None and report.problem.seq <= saved.seq:
        return report  # broken at or before the saved head: the chain's own finding comes first
    if report.head_seq < saved.seq:
        reason = (
            f"the log ends at seq {report.head_seq} but the saved head is at seq {saved.seq}: "
            "events were removed from the end"
        )
        return _failed(report, report.head_seq + 1, reason)
    actual = GENESIS if saved.seq == 0 else found.get(saved.seq, "")
    if actual != saved.hash:
        reason = (
            f"the event at seq {saved.seq} has hash {actual}, the saved head says {saved.hash}: "
            "the log was rewritten (or the saved head is from another database)"
        )
        return _failed(report, saved.seq, reason)
    return report


def _failed(report: ChainReport, seq: int, reason: str) -> ChainReport:
    return ChainReport(report.count, report.head_seq, report.head_hash, ChainProblem(seq, reason, saved_head=True))


def _digest_nofollow(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        h = hashlib.sha256()
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def verify_files(reader: Reader) -> tuple[int, list[FileProblem]]:
    """Every destination Gatekeeper committed to is what its latest committed proposal left: the
    approved bytes after a create or an applied change, nothing after a delete."""
    checked, problems = 0, []
    for proposal_id, workspace, rel, final_path, sha256, outcome in reader.committed_files():
        path = Path(final_path) if final_path else Path(workspace) / rel
        checked += 1
        if outcome == "deleted":
            if os.path.lexists(path):
                problems.append(FileProblem(proposal_id, str(path), "present after its deletion"))
            continue
        try:
            actual = _digest_nofollow(path)
        except FileNotFoundError:
            problems.append(FileProblem(proposal_id, str(path), "missing"))
            continue
        except OSError as exc:
            problems.append(FileProblem(proposal_id, str(path), f"unreadable: {exc.strerror}"))
            continue
        if actual != sha256:
            problems.append(FileProblem(proposal_id, str(path), "changed"))
    return checked, problems


def verify_outcomes(reader: Reader) -> tuple[int, list[OutcomeProblem]]:
    """Every ``commit_record`` row has its ``commit_outcome`` event, and every such event its row.

    They are written in one transaction, so one without the other means the database was written
    outside Gatekeeper: a row deleted (the committer holds that approval back, never applying it
    twice), or an event cut from the chain and the later hashes recomputed."""
    checked, lonely_rows = rows_without_outcomes(reader)
    problems = [
        OutcomeProblem(
            pid,
            f"the commit_outcome event at seq {seq} ({outcome}) has no commit_record row: the row was deleted "
            "from the database; the committer will not apply it again (it says so, with an event)",
        )
        for seq, pid, outcome in outcomes_without_rows(reader)
    ]
    problems += [
        OutcomeProblem(
            pid,
            f"the commit_record row ({outcome}) has no commit_outcome event: the event was cut from the chain "
            "(and the later hashes recomputed), or the row was written outside Gatekeeper",
        )
        for pid, outcome in lonely_rows
    ]
    return checked, problems
