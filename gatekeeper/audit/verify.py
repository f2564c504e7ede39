"""``audit verify``: recompute the hash chain, and optionally compare committed files on disk.

The chain detects any edited, inserted or removed row except a removed tail; a head hash
kept elsewhere (``audit head``) and checked with ``--expect-head`` detects that too.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.store.chain import ChainProblem, ChainReport, batched, verify_rows
from gatekeeper.store.queries import Reader


@dataclass(frozen=True)
class FileProblem:
    proposal_id: str
    path: str
    problem: str  # "missing", "changed", "not a regular file", "unreadable: ..."


def verify_chain(reader: Reader, expect_head: str | None = None) -> ChainReport:
    report = verify_rows(batched(reader.all_events()))
    if report.ok and expect_head is not None and report.head_hash != expect_head.strip().lower():
        reason = (
            f"the chain ends at seq {report.head_seq} with hash {report.head_hash}, not the expected head "
            f"{expect_head.strip()}: events were removed from the end, "
            "or the expected head is from another database"
        )
        return ChainReport(report.count, report.head_seq, report.head_hash, ChainProblem(report.head_seq + 1, reason))
    return report


def _digest_nofollow(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        h = hashlib.sha256()
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def verify_files(reader: Reader) -> tuple[int, list[FileProblem]]:
    """Every file recorded as created must still exist with the approved bytes."""
    checked, problems = 0, []
    for proposal_id, workspace, rel, final_path, sha256 in reader.committed_files():
        path = Path(final_path) if final_path else Path(workspace) / rel
        checked += 1
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
