"""Create one file beneath a workspace root: exclusively, never through a symlink, never partly.

The recipe (shared notes, "Creating a file exclusively"): open each folder beneath the root
with ``openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS)`` or, where that is
missing, with ``O_NOFOLLOW`` one component at a time; write the bytes into an ``O_TMPFILE``
inode in the destination folder, fsync it, then link it under the final name, which fails if
anything at all has that name. A killed writer leaves nothing under any final name. Where
``O_TMPFILE`` is unsupported, a hidden temporary name and ``renameat2(RENAME_NOREPLACE)``;
never an in-place write (the tests plant one, in ``planted.py``, to check that the crash campaign notices).

Outcomes are the caller's business: ``InTheWay`` means something on disk blocks the commit
(a conflict), ``FsyncFailed`` and any other ``OSError`` mean the system refused (a failure).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

from gatekeeper.commit.switches import Switches
from gatekeeper.workspace import syscalls
from gatekeeper.workspace.beneath import InTheWay, open_folder, same_inode
from gatekeeper.workspace.probe import probe

NO_TMPFILE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)
TMP_PREFIX = ".gatekeeper-tmp-"

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "not permitted (is the folder immutable or owned by someone else?)",
    errno.EIO: "an I/O error",
    errno.ENAMETOOLONG: "a name is too long for this file system",
}


class FsyncFailed(Exception):
    """An fsync failed. Never retried: after a failed fsync the kernel may have dropped the dirty pages."""

    def __init__(self, what: str, error: OSError) -> None:
        super().__init__(f"fsync of {what} failed: {describe(error)}")
        self.error = error


def describe(exc: OSError) -> str:
    code = exc.errno or 0
    return f"{_REASONS.get(code, exc.strerror or str(exc))} ({errno.errorcode.get(code, code)})"


def open_dir(root_fd: int, parts: list[str], sw: Switches, *, create: bool) -> int:
    """Open ``parts`` beneath ``root_fd`` following no symlink, creating missing folders if asked.

    A new folder's parent is fsynced before going on, so a recorded commit never names a file
    in a folder that a crash could forget.
    """

    def made(parent: int, where: str) -> None:
        sw.point("after_mkdir")
        fsync(parent, f"the folder holding {where!r}", "dir", sw)

    return open_folder(root_fd, parts, openat2=not sw.no_openat2, made=made if create else None)


def fsync(fd: int, what: str, kind: str, sw: Switches) -> None:
    try:
        sw.fsync(fd, kind)
    except OSError as exc:
        raise FsyncFailed(what, exc) from None


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written: one call may write less."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@dataclass(frozen=True)
class Published:
    linked: bool  # True: this call gave the bytes their name; False: something already had it
    ino: int | None = None


def publish(dirfd: int, name: str, data: bytes, mode: int, sw: Switches) -> Published:
    """Create ``name`` in ``dirfd`` holding exactly ``data``, or report that the name is taken."""
    if sw.no_tmpfile:
        return _publish_by_rename(dirfd, name, data, mode, sw)
    try:
        fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, mode, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno in NO_TMPFILE:
            return _publish_by_rename(dirfd, name, data, mode, sw)
        raise
    try:
        sw.point("after_file_open")
        os.fchmod(fd, mode)  # exactly the rule's mode, whatever the umask
        write_all(fd, data)
        sw.point("after_file_write")
        fsync(fd, f"the new file {name!r}", "file", sw)
        sw.point("after_file_fsync")
        try:
            syscalls.link_fd(fd, dirfd, name)
        except FileExistsError:
            return Published(False)
        sw.point("after_link")
        return Published(True, os.fstat(fd).st_ino)
    finally:
        os.close(fd)


def _publish_by_rename(dirfd: int, name: str, data: bytes, mode: int, sw: Switches) -> Published:
    """Fallback without O_TMPFILE: a hidden temporary name, then an exclusive rename.

    A crash can leave the temporary name behind (never a final name); its prefix says what it is.
    """
    tmp = f"{TMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirfd)
    renamed = False
    try:
        sw.point("after_file_open")
        os.fchmod(fd, mode)
        write_all(fd, data)
        sw.point("after_file_write")
        fsync(fd, f"the new file {name!r}", "file", sw)
        sw.point("after_file_fsync")
        ino = os.fstat(fd).st_ino
        try:
            syscalls.renameat2_noreplace(dirfd, tmp, dirfd, name)
        except FileExistsError:
            return Published(False)
        renamed = True
        sw.point("after_link")
        return Published(True, ino)
    finally:
        os.close(fd)
        if not renamed:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dirfd)


@dataclass(frozen=True)
class Existing:
    kind: str  # "file", "symlink", "folder", "other", "gone"
    sha256: str | None = None  # None for a big file of another size: it cannot be ours, why read it all
    size: int | None = None


HASH_OTHER_SIZES_UP_TO = 16 * 1024 * 1024


def inspect(dirfd: int, name: str, expect_sha256: str, expect_size: int, sw: Switches) -> Existing:
    """What holds ``name`` now, without following it. A file with the expected bytes is fsynced,
    so that recording it as created is as durable as creating it."""
    with probe(dirfd, name) as at:
        if at.kind != "file" or at.st is None:
            return Existing("gone" if at.kind == "missing" else at.coarse)
        size = at.st.st_size
        if size != expect_size and size > HASH_OTHER_SIZES_UP_TO:
            return Existing("file", None, size)
        h = hashlib.sha256()
        while chunk := os.read(at.fd, 1 << 20):
            h.update(chunk)
        digest = h.hexdigest()
        if digest == expect_sha256:
            fsync(at.fd, f"the existing file {name!r}", "file", sw)
        return Existing("file", digest, size)


def still_in_place(workspace: Path, root_fd: int, parts: list[str], dirfd: int, sw: Switches) -> bool:
    """After a link: are the root and the folder we wrote into still at their paths?

    A folder moved elsewhere (and perhaps replaced by a symlink) between opening it and linking
    would have received the file outside the workspace; the caller then removes that name again.
    """
    try:
        if not same_inode(root_fd, os.stat(workspace)):
            return False
        fd = open_dir(root_fd, parts, sw, create=False)
    except (OSError, InTheWay):
        return False
    try:
        return same_inode(fd, dirfd)
    finally:
        os.close(fd)


def unlink_if_ours(dirfd: int, name: str, ino: int | None) -> bool:
    """Remove ``name`` only if it is still the inode this committer linked."""
    try:
        if ino is not None and os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_ino == ino:
            os.unlink(name, dir_fd=dirfd)
            os.fsync(dirfd)
            return True
    except OSError:
        pass
    return False


@dataclass
class DirSync:
    """Folders that got new names in a batch: each is fsynced once, before any outcome is recorded."""

    fds: dict[tuple[int, int], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, fd: int) -> tuple[int, int]:
        """Take ownership of ``fd``; return its folder's key. Safe from several threads."""
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with self.lock:
            if key not in self.fds:
                self.fds[key] = fd
                return key
        os.close(fd)
        return key

    def sync(self, sw: Switches) -> dict[tuple[int, int], FsyncFailed]:
        failures: dict[tuple[int, int], FsyncFailed] = {}
        for key, fd in self.fds.items():
            try:
                fsync(fd, "the destination folder", "dir", sw)
            except FsyncFailed as exc:
                failures[key] = exc
                continue
            sw.point("after_dir_fsync")
        return failures

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
