"""What one pass of the committer did: each proposal's ``Result``, and the ``PassReport`` that
``commit`` prints and ``commit --watch`` logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    proposal_id: str
    path: str
    outcome: str  # created / applied / deleted / conflict / refused / failed; "busy": left for a later pass
    detail: str = ""
    observed_sha256: str | None = None
    final_path: str | None = None
    linked: bool = False  # this process gave the file its name
    recorded: bool = False  # this process recorded the outcome (False: another committer was first)
    stop: bool = False  # an fsync failed: end the pass, the disk needs a person
    dir_key: tuple[int, int] | None = None
    leftover: str | None = None  # a change's temporary name (holding the base), removed once recorded
    change: bool = False  # a change or delete: its folder is swept of stale temporary names

    def record(self) -> dict[str, Any]:
        return {
            "proposal_id": self.proposal_id,
            "outcome": self.outcome,
            "detail": self.detail,
            "observed_sha256": self.observed_sha256,
            "final_path": self.final_path,
        }

    def as_dict(self) -> dict[str, Any]:
        return {**self.record(), "path": self.path, "linked": self.linked, "recorded": self.recorded}


@dataclass
class PassReport:
    results: list[Result] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # why some approvals were left for a later pass
    stopped: str | None = None
    finished: set[str] = field(default_factory=set)
    elsewhere: set[str] = field(default_factory=set)  # claimed by another committer (PostgreSQL): theirs
    queued: int = 0

    @property
    def unfinished(self) -> int:
        return self.queued - len(self.finished) - len(self.elsewhere - self.finished)
