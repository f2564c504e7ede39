"""The committer's own at-most-once journal: ``<home>/commit-journal``, beside its lock, outside the database.

Someone who can write the database but holds no key can delete a proposal's ``commit_record`` row
and its ``commit_intent`` / ``commit_outcome`` events and recompute every later hash: the database
then says the approval was never applied. Signed checkpoints show that to ``audit verify``
afterwards; the journal makes the committer refuse before it acts. Append-only, one JSON line per
proposal and step, each batch's lines written at once and fsynced:

``intent``    after the intent events are committed, before any file step (fsynced first)
``done``      the file step's outcome, before the outcome rows are written (fsynced first)
``recorded``  the outcome rows are committed (not fsynced: if lost, ``done`` stands in for it)
``refused``   the database contradicted the journal: refused now and every time after

So for a proposal in the queue (no outcome row): no line, act as usual; ``intent`` with the
intent event still in the database, an interrupted attempt, finished from the disk as before;
``done`` with its intent event, killed before the outcome rows: record the journaled outcome,
touch nothing; anything else (``recorded``, ``refused``, or an intent event gone) means the
database lost what this committer wrote: refused, with an event and exit status 1.
The home is the trusted side: a database writer cannot reach it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gatekeeper.canonical import now_ts

JOURNAL_NAME = "commit-journal"
COMPACT_AFTER = 10_000  # lines of history beyond the entries before a committer rewrites the journal
STEPS = ("intent", "done", "recorded", "refused")


@dataclass(frozen=True)
class Entry:
    """What the journal says of one proposal: its latest step, and the outcome once ``done``."""

    step: str
    at: str
    outcome: dict[str, Any] | None = None


class JournalError(OSError):
    """The journal cannot be read or written: the committer stops rather than act without it."""


class Journal:
    """``<home>/commit-journal``: read incrementally at each pass, appended once per batch and step."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, Entry] = {}
        self._offset = 0
        self._partial = b""
        self.lines = 0  # lines read: many more than entries, and ``compact`` is worth it

    def refresh(self) -> None:
        """Read what was appended since the last call (by this or another committer of this home)."""
        try:
            with open(self.path, "rb", opener=_nofollow) as f:
                f.seek(self._offset)
                data = self._partial + f.read()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(
                exc.errno,
                f"cannot read the committer's journal {self.path}: {exc.strerror}; nothing was written "
                "(the committer does not act without it: make it a readable file again)",
            ) from None
        self._offset += len(data) - len(self._partial)
        *lines, self._partial = data.split(b"\n")
        self.lines += len(lines)
        for line in lines:
            self._take(line)

    def _take(self, line: bytes) -> None:
        """One line; a torn one (a kill during a write, never acted upon) is skipped."""
        try:
            item = orjson.loads(line)
            pid, step = str(item["proposal"]), str(item["step"])
        except (ValueError, KeyError, TypeError):
            return
        if step not in STEPS:
            return
        known = self.entries.get(pid)
        if known is not None and known.step in ("recorded", "refused") and step != "refused":
            return  # final: nothing undoes them
        outcome = item.get("outcome") if step == "done" else None  # needed until it is recorded
        self.entries[pid] = Entry(step, str(item.get("at", "")), outcome if isinstance(outcome, dict) else None)

    def get(self, proposal_id: str) -> Entry | None:
        return self.entries.get(proposal_id)

    def wasteful(self) -> bool:
        """Three lines per applied proposal pile up: worth rewriting once they are mostly history."""
        return self.lines > 2 * len(self.entries) + COMPACT_AFTER

    def compact(self) -> None:
        """Rewrite the journal as one line per proposal, its latest step, replacing it atomically.

        Only while no other committer of this home can append (the exclusive ``commit.lock``):
        a line appended between the read and the rename would be lost. A kill before the rename
        leaves the old journal whole."""
        self.refresh()
        lines = [
            json.dumps({"step": e.step, "at": e.at, "proposal": pid, **({"outcome": e.outcome} if e.outcome else {})})
            for pid, e in self.entries.items()
        ]
        data = "".join(line + "\n" for line in lines).encode()
        tmp = self.path.with_name(f".{JOURNAL_NAME}.compact")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            _sync_dir(self.path.parent)
        except OSError as exc:
            why = f"cannot compact the committer's journal {self.path}: {exc.strerror}"
            raise JournalError(exc.errno, why) from None
        self._offset, self._partial, self.lines = len(data), b"", len(lines)

    def append(self, step: str, items: Iterable[dict[str, Any]], *, sync: bool = True) -> None:
        """One line per item (``proposal`` and whatever else it names), in one write, fsynced."""
        at = now_ts()
        lines = [json.dumps({"step": step, "at": at, **item}, sort_keys=True) for item in items]
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode()
        try:
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # a torn last line stays alone, and is skipped
                _write_all(fd, data)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                _sync_dir(self.path.parent)
        except OSError as exc:
            raise JournalError(
                exc.errno, f"cannot write the committer's journal {self.path}: {exc.strerror}; nothing was written"
            ) from None


def _nofollow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
