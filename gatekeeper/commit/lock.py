"""One committer at a time: an exclusive ``flock`` on ``<home>/commit.lock``.

The kernel drops the lock when its holder exits, however it exits (kill -9 included), so a
stale lock cannot block anyone; the pid, host and start time written inside only tell a
second committer whom to look for. The file is never deleted: unlinking a lock file lets two
processes hold "the" lock on two different inodes.

The lock is a convenience, not the safety argument: exclusive creation and the unique outcome
row keep two committers safe (the tests run two with ``GATEKEEPER_COMMIT_NO_LOCK=1``).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from gatekeeper.canonical import now_ts
from gatekeeper.errors import GatekeeperError


class CommitterBusy(GatekeeperError):
    """Another committer holds the lock."""

    exit_code = 3


class CommitLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise CommitterBusy(
                f"another committer is running: {holder} (lock {self.path})",
                "stop that one first (`gatekeeper up` runs one), or leave it running: it commits every approval",
            ) from None
        except BaseException:
            os.close(fd)
            raise
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": now_ts(), "argv": sys.argv[1:]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info, sort_keys=True) + "\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock; the file stays
            self._fd = None

    def __enter__(self) -> CommitLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on host {info['host']}, started {info['started_at']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process whose details are not readable yet"
