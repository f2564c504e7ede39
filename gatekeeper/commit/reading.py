"""What is at a workspace-relative path right now, read with the committer's primitives: each
folder opened beneath the root without following a symlink, the file itself opened ``O_NOFOLLOW``.

Read-only. The proxy reads a change's base with it, the review page checks that the base is
still there, ``revert`` reads what it would restore over.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.commit import fsops
from gatekeeper.commit.testing import OFF

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class Found:
    """``kind``: file, missing, symlink, folder, other (FIFO, socket, device) or blocked (a folder on
    the way is a symlink or a file). ``data`` is None for a file over the limit (see ``size``)."""

    kind: str
    data: bytes | None = None
    size: int | None = None
    mode: int | None = None  # permission bits of a regular file
    detail: str = ""

    @property
    def too_large(self) -> bool:
        return self.kind == "file" and self.data is None


def read_at(workspace: Path, rel: str, limit: int) -> Found:
    """Read ``rel`` (normalised, relative, POSIX) beneath ``workspace``: at most ``limit`` bytes."""
    parts = rel.split("/")
    root = fsops.open_root(workspace)
    try:
        try:
            dirfd = fsops.open_dir(root, parts[:-1], OFF, create=False)
        except FileNotFoundError:
            return Found("missing")
        except fsops.InTheWay as exc:
            return Found("blocked", detail=exc.detail)
    finally:
        os.close(root)
    try:
        return _read_file(dirfd, parts[-1], limit)
    finally:
        os.close(dirfd)


def _read_file(dirfd: int, name: str, limit: int) -> Found:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Found("symlink")
        if exc.errno == errno.ENOENT:
            return Found("missing")
        if exc.errno == errno.ENXIO:  # a socket
            return Found("other")
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return Found("folder")
        if not stat.S_ISREG(st.st_mode):
            return Found("other")
        mode = stat.S_IMODE(st.st_mode)
        if st.st_size > limit:
            return Found("file", None, st.st_size, mode)
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while being read
                return Found("file", None, total, mode)
        data = b"".join(chunks)
        return Found("file", data, len(data), mode)
    finally:
        os.close(fd)
