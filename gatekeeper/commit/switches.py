"""The committer's one test seam: a ``Switches`` object given to it at construction.

Production code calls ``point(name)`` at each named step of a commit (``CRASH_POINTS``), fsyncs
through ``fsync``, and asks ``step(name, function)`` for the function of a replaceable step; with
``OFF`` (the default) each is a no-op or the production function. Only the test harness
(``faults.from_env``: crash points, pauses, injected fsync errors, planted bugs) sets anything here;
nothing in this module knows what the tests plant.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

CRASH_EXIT = 137
F = TypeVar("F", bound=Callable[..., Any])

# Every step of a commit, in order. Per-pass points fire once a pass, per-batch once a batch,
# the others once per proposal (or per folder, for the directory steps).
CRASH_POINTS = (
    "after_select",  # the queue has been read (per pass)
    "after_refusal",  # refusal outcomes committed (per batch that has any)
    "intent_tx_open",  # intent events appended, transaction not yet committed (per batch)
    "after_intent",  # intent transaction committed (per batch)
    "after_journal_intent",  # the batch's intents are durable in the committer's journal (per batch)
    "after_mkdir",  # a missing folder was created, its parent not yet fsynced
    "after_open_parent",  # the destination folder is open beneath the root
    "after_file_open",  # O_TMPFILE inode open (in_place bug: the empty file under the final name)
    "after_file_write",  # bytes written, not yet fsynced
    "after_file_fsync",  # bytes durable, no name yet
    "after_link",  # the final name exists
    "after_tmp_open",  # a change: the O_TMPFILE inode for the result is open (change_in_place bug: file truncated)
    "after_tmp_write",  # a change: the result written, not yet fsynced
    "after_tmp_fsync",  # a change: the result durable, no name yet
    "after_tmp_link",  # a change: the result is durable under its temporary name, not yet swapped in
    "after_exchange",  # a change: result and destination exchanged, what went out not yet checked
    "after_exchange_back",  # a change: what went out was not the base and is back, temporary name not removed
    "after_move_aside",  # a delete: the file renamed to its temporary name, not yet checked
    "after_reconcile_hash",  # an existing file at the name has been hashed
    "after_dir_fsync",  # the folder holding new names is durable (per folder)
    "before_outcome",  # every file step of the batch is done
    "after_journal_done",  # the file steps' outcomes are durable in the journal, not yet in the database (per batch)
    "outcome_row_written",  # inside the outcome transaction, after a row (separate_event: between transactions)
    "after_outcome",  # outcome transaction committed (per batch)
)


@dataclass
class Switches:
    crash: dict[str, int] = field(default_factory=dict)
    pause: dict[str, tuple[int, str]] = field(default_factory=dict)
    bug: str | None = None  # the planted bug's name, for messages; ``replaced`` holds its step
    replaced: dict[str, Callable[..., Any]] = field(default_factory=dict)
    inject: str | None = None
    no_openat2: bool = False
    no_tmpfile: bool = False
    no_lock: bool = False
    active: tuple[str, ...] = ()
    _seen: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def point(self, name: str) -> None:
        """Mark that the committer reached ``name``; crash or pause here if a test asked for it."""
        if not self.crash and not self.pause:
            return
        with self._lock:  # file steps run on several threads: the nth pass is still exactly one
            self._seen[name] += 1
            n = self._seen[name]
        if self.crash.get(name) == n:
            os._exit(CRASH_EXIT)
        paused = self.pause.get(name)
        if paused is not None and paused[0] == n:
            prefix = paused[1]
            Path(prefix + ".paused").touch()
            deadline = time.monotonic() + 60
            while not os.path.exists(prefix + ".resume") and time.monotonic() < deadline:
                time.sleep(0.005)

    def step(self, name: str, production: F) -> F:
        """The function for step ``name``: ``production``, unless the test harness replaced that step."""
        return cast(F, self.replaced.get(name, production))

    def fsync(self, fd: int, kind: str) -> None:
        """``os.fsync``, or an injected EIO for ``kind`` ("file" or "dir") once per process."""
        with self._lock:
            fail, self.inject = (True, None) if self.inject == f"fsync_eio:{kind}" else (False, self.inject)
        if fail:
            raise OSError(errno.EIO, os.strerror(errno.EIO) + " (injected by GATEKEEPER_INJECT)")
        os.fsync(fd)


OFF = Switches()
