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
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from gatekeeper.commit import syscalls
from gatekeeper.commit.testing import Switches

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_A_DIR = (errno.ELOOP, errno.ENOTDIR, errno.EXDEV)
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


class InTheWay(Exception):
    """Something on disk blocks the commit: a symlink, a file where a folder goes, another file."""

    def __init__(self, detail: str, observed_sha256: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.observed_sha256 = observed_sha256


class FsyncFailed(Exception):
    """An fsync failed. Never retried: after a failed fsync the kernel may have dropped the dirty pages."""

    def __init__(self, what: str, error: OSError) -> None:
        super().__init__(f"fsync of {what} failed: {describe(error)}")
        self.error = error


def describe(exc: OSError) -> str:
    code = exc.errno or 0
    return f"{_REASONS.get(code, exc.strerror or str(exc))} ({errno.errorcode.get(code, code)})"


def use_openat2(sw: Switches) -> bool:
    return not sw.no_openat2 and syscalls.openat2_works()


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


def _open_child(parent: int, name: str, sw: Switches) -> int:
    if use_openat2(sw):
        return syscalls.openat2(parent, name, _DIR_FLAGS)
    return os.open(name, _DIR_FLAGS, dir_fd=parent)


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


def open_dir(root_fd: int, parts: list[str], sw: Switches, *, create: bool) -> int:
    """Open ``parts`` beneath ``root_fd`` following no symlink, creating missing folders if asked.

    A new folder's parent is fsynced before going on, so a recorded commit never names a file
    in a folder that a crash could forget.
    """
    if parts and use_openat2(sw):
        try:  # the common case in one call: every folder already there, no symlink anywhere
            return syscalls.openat2(root_fd, "/".join(parts), _DIR_FLAGS)
        except OSError:
            pass  # missing folders, or something in the way: the walk below creates or names it
    fd = os.dup(root_fd)
    try:
        for i, part in enumerate(parts):
            where = "/".join(parts[: i + 1])
            made = False
            for attempt in (1, 2):
                try:
                    child = _open_child(fd, part, sw)
                    if made:  # 0755 whatever the umask: Gatekeeper's own processes run under 077
                        os.fchmod(child, 0o755)
                    break
                except FileNotFoundError:
                    if not create or attempt == 2:
                        raise
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                        made = True
                    except FileExistsError:
                        continue  # another committer made it, or something else is there: open says which
                    sw.point("after_mkdir")
                    fsync(fd, f"the folder holding {where!r}", "dir", sw)
                except OSError as exc:
                    if exc.errno in _NOT_A_DIR:
                        raise _not_a_folder(fd, part, where) from None
                    raise
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


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
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Existing("symlink")
        if exc.errno == errno.ENOENT:
            return Existing("gone")
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return Existing("folder")
        if not stat.S_ISREG(st.st_mode):
            return Existing("other")
        if st.st_size != expect_size and st.st_size > HASH_OTHER_SIZES_UP_TO:
            return Existing("file", None, st.st_size)
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        digest = h.hexdigest()
        if digest == expect_sha256:
            fsync(fd, f"the existing file {name!r}", "file", sw)
        return Existing("file", digest, st.st_size)
    finally:
        os.close(fd)


def same_inode(fd: int, other: int | os.stat_result) -> bool:
    a = os.fstat(fd)
    b = other if isinstance(other, os.stat_result) else os.fstat(other)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


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
