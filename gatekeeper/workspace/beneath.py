"""Open folders beneath a workspace root, following no symlink on the way.

``openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS)`` where the kernel has it,
otherwise ``O_NOFOLLOW`` one component at a time. A symlink, or a file where a folder goes,
raises ``InTheWay`` naming it; a missing folder raises ``FileNotFoundError`` unless the caller
asked for it to be made.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from gatekeeper.workspace import syscalls

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_A_DIR = (errno.ELOOP, errno.ENOTDIR, errno.EXDEV)


class InTheWay(Exception):
    """Something on disk blocks the way: a symlink, a file where a folder goes, another file."""

    def __init__(self, detail: str, observed_sha256: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.observed_sha256 = observed_sha256


def open_root(workspace: Path) -> int:
    """The workspace root itself, as configured: a symlink in *its* path was the person's choice,
    and ``real_path`` then tells whether it still leads where it did when the proposal was made."""
    return os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def real_path(root_fd: int, workspace: Path) -> str:
    """Where the opened root really is. The kernel's own name for the descriptor (``/proc``) cannot
    be fooled by a swap of the path after opening; without ``/proc``, the resolved path, provided
    it is still the folder that was opened."""
    try:
        return os.readlink(f"/proc/self/fd/{root_fd}")
    except OSError:
        real = os.path.realpath(workspace)
        with contextlib.suppress(OSError):
            if same_inode(root_fd, os.stat(real)):
                return real
        return f"{real} (it changed while it was being checked)"


def same_inode(fd: int, other: int | os.stat_result) -> bool:
    a = os.fstat(fd)
    b = other if isinstance(other, os.stat_result) else os.fstat(other)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _open_child(parent: int, name: str, openat2: bool) -> int:
    if openat2:
        return syscalls.openat2(parent, name, DIR_FLAGS)
    return os.open(name, DIR_FLAGS, dir_fd=parent)


def _not_a_folder(parent: int, name: str, where: str) -> InTheWay:
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return InTheWay(f"the folder {where!r} changed while it was being opened")
    if stat.S_ISLNK(st.st_mode):
        return InTheWay(f"{where!r} is a symbolic link; Gatekeeper never follows links inside the workspace")
    if stat.S_ISREG(st.st_mode):
        return InTheWay(f"{where!r} is a file, not a folder")
    return InTheWay(f"{where!r} is not a folder")


def open_folder(
    root_fd: int, parts: list[str], *, openat2: bool = True, made: Callable[[int, str], None] | None = None
) -> int:
    """Open ``parts`` beneath ``root_fd`` following no symlink. ``openat2``: use it where the kernel
    has it. ``made``: create missing folders (mode 0755), calling ``made(parent_fd, where)`` after
    each, before going on (the committer fsyncs the parent there)."""
    openat2 = openat2 and syscalls.openat2_works()
    if parts and openat2:
        try:  # the common case in one call: every folder already there, no symlink anywhere
            return syscalls.openat2(root_fd, "/".join(parts), DIR_FLAGS)
        except OSError:
            pass  # missing folders, or something in the way: the walk below creates or names it
    fd = os.dup(root_fd)
    try:
        for i, part in enumerate(parts):
            fd = _step(fd, part, "/".join(parts[: i + 1]), openat2, made)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _step(fd: int, part: str, where: str, openat2: bool, made: Callable[[int, str], None] | None) -> int:
    """The folder ``part`` in ``fd`` (made if missing and asked); ``fd`` is closed once it is open."""
    created = False
    for attempt in (1, 2):
        try:
            child = _open_child(fd, part, openat2)
            if created:  # 0755 whatever the umask: Gatekeeper's own processes run under 077
                os.fchmod(child, 0o755)
            break
        except FileNotFoundError:
            if made is None or attempt == 2:
                raise
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                created = True
            except FileExistsError:
                continue  # another committer made it, or something else is there: open says which
            made(fd, where)
        except OSError as exc:
            if exc.errno in _NOT_A_DIR:
                raise _not_a_folder(fd, part, where) from None
            raise
    os.close(fd)
    return child
