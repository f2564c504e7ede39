"""What is at a name in an open folder right now, without following it: the one probe every
reader and writer of a workspace asks, so they all tell the kinds apart the same way.

The name is opened ``O_NOFOLLOW|O_NONBLOCK`` (a FIFO does not block, a symlink fails with
``ELOOP``, a socket with ``ENXIO``) and the open descriptor is what gets looked at, so the answer
and any bytes read afterwards come from the same inode.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
KINDS = ("file", "folder", "symlink", "fifo", "socket", "device", "missing")
SPECIAL = frozenset({"fifo", "socket", "device"})  # "not a regular file" in every message


@dataclass(frozen=True)
class At:
    """``kind``: one of ``KINDS``. ``fd``: open for reading while the probe's block runs, for a
    regular file only (-1 otherwise); ``st``: its ``fstat``."""

    kind: str
    fd: int = -1
    st: os.stat_result | None = None

    @property
    def coarse(self) -> str:
        """file, folder, symlink, missing, or other (FIFO, socket, device): the words callers show."""
        return "other" if self.kind in SPECIAL else self.kind


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def _unopenable(dirfd: int, name: str, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink"
    if exc.errno == errno.ENOENT:
        return "missing"
    if exc.errno == errno.ENXIO:  # a socket, or a device with nothing behind it
        try:
            return _kind(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return "missing"
    raise exc


@contextmanager
def probe(dirfd: int, name: str) -> Iterator[At]:
    """``with probe(dirfd, name) as at:`` what is at ``name``; a regular file's ``at.fd`` is open
    for reading inside the block and closed after it."""
    try:
        fd = os.open(name, FLAGS, dir_fd=dirfd)
    except OSError as exc:
        kind = _unopenable(dirfd, name, exc)
        yield At(kind)
        return
    try:
        st = os.fstat(fd)
        kind = _kind(st.st_mode)
        yield At(kind, fd if kind == "file" else -1, st)
    finally:
        os.close(fd)
