"""The Linux calls Python 3.11 lacks: ``openat2`` (syscall 437) and ``renameat2`` (no-replace and
exchange), through ctypes.

Each is feature-detected once. ``None`` from a detector means "not here": callers fall back to
the component-by-component ``O_NOFOLLOW`` walk, or refuse; they never fall back to anything weaker.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from functools import cache

SYS_OPENAT2 = 437  # the same number on x86-64 and aarch64 (the generic syscall table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE_STRICT = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


@cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _raise(path: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err), path)


def openat2(dir_fd: int, path: str, flags: int, resolve: int = RESOLVE_STRICT, mode: int = 0) -> int:
    """``openat2(dir_fd, path, {flags, mode, resolve})``; raises ``OSError`` like ``os.open``."""
    libc = _libc()
    if libc is None:
        raise OSError(errno.ENOSYS, "no libc", path)
    how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
    fd = libc.syscall(
        ctypes.c_long(SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        _raise(path)
    return int(fd)


@cache
def openat2_works() -> bool:
    """True when openat2 exists and knows every resolve flag used here (old kernels: ENOSYS/EINVAL).

    Seccomp filters that answer EPERM or ENOSYS count as "absent" too.
    """
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64", "arm64"):
        return False
    root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.close(openat2(root, ".", os.O_RDONLY | os.O_DIRECTORY))
    except OSError:
        return False
    finally:
        os.close(root)
    return True


def _renameat2(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str, flags: int) -> None:
    libc = _libc()
    fn = getattr(libc, "renameat2", None) if libc is not None else None
    if fn is None:  # glibc < 2.28
        raise OSError(errno.ENOSYS, "renameat2 is not available in this C library", dst)
    rc = fn(
        ctypes.c_int(src_dir_fd),
        ctypes.c_char_p(os.fsencode(src)),
        ctypes.c_int(dst_dir_fd),
        ctypes.c_char_p(os.fsencode(dst)),
        ctypes.c_uint(flags),
    )
    if rc != 0:
        _raise(dst)


def renameat2_noreplace(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    """Rename that fails with ``EEXIST`` if anything (even a dangling symlink) has the new name."""
    _renameat2(src_dir_fd, src, dst_dir_fd, dst, RENAME_NOREPLACE)


def renameat2_exchange(dir_fd: int, a: str, b: str) -> None:
    """Swap the names ``a`` and ``b`` in ``dir_fd`` in one step: a reader of either name sees one
    whole inode or the other, never neither. ``ENOENT`` if either is missing."""
    _renameat2(dir_fd, a, dir_fd, b, RENAME_EXCHANGE)


AT_EMPTY_PATH = 0x1000


@cache
def _proc_fd_works() -> bool:
    return os.path.isdir("/proc/self/fd")


def link_fd(fd: int, dst_dir_fd: int, name: str) -> None:
    """Give the open inode ``fd`` the name ``name`` in ``dst_dir_fd``; ``EEXIST`` if anything has it.

    Through ``/proc/self/fd`` (ran unprivileged here); without ``/proc``, ``linkat(AT_EMPTY_PATH)``.
    """
    if _proc_fd_works():
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dst_dir_fd, follow_symlinks=True)
        return
    libc = _libc()
    if libc is None:
        raise OSError(errno.ENOSYS, "no libc", name)
    rc = libc.linkat(
        ctypes.c_int(fd), ctypes.c_char_p(b""), ctypes.c_int(dst_dir_fd), ctypes.c_char_p(os.fsencode(name)),
        ctypes.c_int(AT_EMPTY_PATH),
    )  # fmt: skip
    if rc != 0:
        _raise(name)
