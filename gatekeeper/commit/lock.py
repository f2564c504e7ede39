"""One committer per server at a time: ``flock`` on ``<home>/commit.lock`` (and ``commit-SERVER.lock``).

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
from collections.abc import Callable
from functools import partial
from pathlib import Path

from gatekeeper.canonical import now_ts
from gatekeeper.errors import GatekeeperError


class CommitterBusy(GatekeeperError):
    """Another committer holds the lock."""

    exit_code = 3


class CommitLock:
    """The committer's locks: ``commit.lock`` alone for a committer of every server; for
    ``commit --server A --server B``, ``commit.lock`` shared and ``commit-A.lock``, ``commit-B.lock``
    exclusive. Committers of disjoint servers run side by side; overlapping sets, or any beside a
    committer of every server, do not."""

    def __init__(self, path: Path, servers: frozenset[str] | None = None) -> None:
        self.path = path
        self.servers = servers
        self._fds: list[int] = []

    def server_path(self, server: str) -> Path:
        return self.path.with_name(f"commit-{server}.lock")

    def acquire(self) -> None:
        try:
            if self.servers is None:
                self._take(self.path, fcntl.LOCK_EX, self._all_busy)
                return
            self._take(self.path, fcntl.LOCK_SH, self._all_busy, write=False)
            for server in sorted(self.servers):
                self._take(self.server_path(server), fcntl.LOCK_EX, partial(self._server_busy, server))
        except BaseException:
            self.release()
            raise

    def _take(self, path: Path, how: int, busy: Callable[[int], CommitterBusy], *, write: bool = True) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
        except BlockingIOError:
            error = busy(fd)
            os.close(fd)
            raise error from None
        except BaseException:
            os.close(fd)
            raise
        self._fds.append(fd)
        if write:  # a shared holder leaves the file to the exclusive one's details
            info = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": now_ts(), "argv": sys.argv[1:]}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info, sort_keys=True) + "\n").encode(), 0)

    def _server_busy(self, server: str, fd: int) -> CommitterBusy:
        return _busy(f" for server {server!r}: {_read_holder(fd)}", self.server_path(server))

    def _all_busy(self, fd: int) -> CommitterBusy:
        """``commit.lock`` is taken: by committers of some servers (listed), or by one of every server."""
        held = [f"for server {p.stem.removeprefix('commit-')!r}: {who}" for p, who in self._held_server_locks()]
        if held and self.servers is None:
            return _busy(" " + "; ".join(held), self.path)
        every = " for every server" if self.servers is not None else ""
        return _busy(f"{every}: {_read_holder(fd)}", self.path)

    def _held_server_locks(self) -> list[tuple[Path, str]]:
        held = []
        for path in sorted(self.path.parent.glob("commit-*.lock")):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append((path, _read_holder(fd)))
            finally:
                os.close(fd)  # a probe that got the lock drops it here
        return held

    def release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())  # closing drops the flock; the file stays

    def __enter__(self) -> CommitLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _busy(who: str, path: Path) -> CommitterBusy:
    return CommitterBusy(
        f"another committer is running{who} (lock {path})",
        "stop that one first (`gatekeeper up` runs one), or leave it running: it commits those approvals; "
        "committers for different servers (`commit --server NAME`) can run side by side",
    )


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on host {info['host']}, started {info['started_at']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process whose details are not readable yet"
