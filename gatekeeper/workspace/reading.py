"""What is at a workspace-relative path right now: each folder opened beneath the root without
following a symlink (``beneath``), the name itself looked at by the one probe (``probe``).

Read-only. The proxy reads a change's base with it, the review page checks that the base is
still there, ``revert`` reads what it would restore over.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.workspace.beneath import InTheWay, open_folder, open_root
from gatekeeper.workspace.probe import probe


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
    root = open_root(workspace)
    try:
        try:
            dirfd = open_folder(root, parts[:-1])
        except FileNotFoundError:
            return Found("missing")
        except InTheWay as exc:
            return Found("blocked", detail=exc.detail)
    finally:
        os.close(root)
    try:
        return _read_file(dirfd, parts[-1], limit)
    finally:
        os.close(dirfd)


def _read_file(dirfd: int, name: str, limit: int) -> Found:
    with probe(dirfd, name) as at:
        if at.kind != "file" or at.st is None:
            return Found(at.coarse)
        mode = stat.S_IMODE(at.st.st_mode)
        if at.st.st_size > limit:
            return Found("file", None, at.st.st_size, mode)
        chunks, total = [], 0
        while chunk := os.read(at.fd, min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while being read
                return Found("file", None, total, mode)
        data = b"".join(chunks)
        return Found("file", data, len(data), mode)
