"""Test-only switches, read from the environment when a committer starts. Never set them in use.

They exist because random kill timing almost never hits the narrow windows that matter (see the
shared notes): the crash campaign needs to stop the committer at a named step, to pause it while
a test swaps a folder, to make an fsync fail, and to run deliberately broken variants that the
campaign must catch. A committer that sees any of them says so on stderr.

``GATEKEEPER_CRASH_AT=point:n[,point:n]``  ``os._exit(137)`` on the nth pass through ``point``.
``GATEKEEPER_PAUSE_AT=point:n:PREFIX``  on the nth pass create ``PREFIX.paused``, wait for ``PREFIX.resume``.
``GATEKEEPER_PLANT_BUG=separate_event``  the outcome's audit event in its own transaction, after the row.
``GATEKEEPER_PLANT_BUG=in_place``  write with ``O_CREAT|O_EXCL`` under the final name instead of O_TMPFILE.
``GATEKEEPER_PLANT_BUG=change_in_place``  a change rewrites the file in place (``O_TRUNC``) instead of swapping.
  (The bugs live in ``planted.py``; each replaces one named step, see ``Switches.step``.)
``GATEKEEPER_INJECT=fsync_eio:file|dir``  that kind of fsync fails with EIO (once per process).
``GATEKEEPER_NO_OPENAT2=1``, ``GATEKEEPER_NO_TMPFILE=1``  force the fallbacks (O_NOFOLLOW walk; renameat2).
``GATEKEEPER_COMMIT_NO_LOCK=1``  skip the one-committer lock (the design must be safe without it).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from gatekeeper.errors import InvalidInput

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
# Each planted bug replaces one named step of the committer (functions in planted.py, same names).
PLANTED_STEPS = {"separate_event": "record_outcomes", "in_place": "publish", "change_in_place": "apply_change"}
PLANTED_BUGS = tuple(PLANTED_STEPS)
INJECTIONS = ("fsync_eio:file", "fsync_eio:dir")
ENV_VARS = (
    "GATEKEEPER_CRASH_AT",
    "GATEKEEPER_PAUSE_AT",
    "GATEKEEPER_PLANT_BUG",
    "GATEKEEPER_INJECT",
    "GATEKEEPER_NO_OPENAT2",
    "GATEKEEPER_NO_TMPFILE",
    "GATEKEEPER_COMMIT_NO_LOCK",
)


def _bad(var: str, value: str, why: str) -> InvalidInput:
    return InvalidInput(f"{var}={value!r}: {why}", "this is a test-only switch; unset it to run normally")


def _point_count(var: str, value: str, text: str) -> tuple[str, int]:
    name, _, count = text.partition(":")
    if name not in CRASH_POINTS:
        raise _bad(var, value, f"unknown point {name!r}; known: {', '.join(CRASH_POINTS)}")
    if not count.isdigit() or int(count) < 1:
        raise _bad(var, value, "expected point:n with n >= 1")
    return name, int(count)


@dataclass
class Switches:
    crash: dict[str, int] = field(default_factory=dict)
    pause: dict[str, tuple[int, str]] = field(default_factory=dict)
    bug: str | None = None
    inject: str | None = None
    no_openat2: bool = False
    no_tmpfile: bool = False
    no_lock: bool = False
    active: tuple[str, ...] = ()
    _seen: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Switches:
        env = os.environ if env is None else env
        sw = cls(active=tuple(f"{v}={env[v]}" for v in ENV_VARS if env.get(v)))
        if raw := env.get("GATEKEEPER_CRASH_AT", ""):
            sw.crash = dict(_point_count("GATEKEEPER_CRASH_AT", raw, part) for part in raw.split(","))
        if raw := env.get("GATEKEEPER_PAUSE_AT", ""):
            spec, sep, prefix = raw.rpartition(":")
            if not sep or not prefix:
                raise _bad("GATEKEEPER_PAUSE_AT", raw, "expected point:n:PREFIX")
            name, count = _point_count("GATEKEEPER_PAUSE_AT", raw, spec)
            sw.pause = {name: (count, prefix)}
        if raw := env.get("GATEKEEPER_PLANT_BUG", ""):
            if raw not in PLANTED_BUGS:
                raise _bad("GATEKEEPER_PLANT_BUG", raw, f"known bugs: {', '.join(PLANTED_BUGS)}")
            sw.bug = raw
        if raw := env.get("GATEKEEPER_INJECT", ""):
            if raw not in INJECTIONS:
                raise _bad("GATEKEEPER_INJECT", raw, f"known: {', '.join(INJECTIONS)}")
            sw.inject = raw
        sw.no_openat2 = env.get("GATEKEEPER_NO_OPENAT2", "") not in ("", "0")
        sw.no_tmpfile = env.get("GATEKEEPER_NO_TMPFILE", "") not in ("", "0")
        sw.no_lock = env.get("GATEKEEPER_COMMIT_NO_LOCK", "") not in ("", "0")
        return sw

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
        """The function for step ``name``: ``production``, unless a planted bug replaces that step."""
        if self.bug is None or PLANTED_STEPS[self.bug] != name:
            return production
        from gatekeeper.commit import planted  # only ever loaded with GATEKEEPER_PLANT_BUG set

        return cast(F, getattr(planted, self.bug))

    def fsync(self, fd: int, kind: str) -> None:
        """``os.fsync``, or an injected EIO for ``kind`` ("file" or "dir") once per process."""
        with self._lock:
            fail, self.inject = (True, None) if self.inject == f"fsync_eio:{kind}" else (False, self.inject)
        if fail:
            raise OSError(errno.EIO, os.strerror(errno.EIO) + " (injected by GATEKEEPER_INJECT)")
        os.fsync(fd)


OFF = Switches()
