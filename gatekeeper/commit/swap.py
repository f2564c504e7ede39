"""Change or delete an existing file only if it still holds the approved base: compare-and-swap.

A change (replace, append, edit): the result is written into an ``O_TMPFILE`` inode in the
destination's folder, fsynced, linked under a temporary name derived from the proposal id
(``.gatekeeper-<id>.new``), and swapped with the destination by ``renameat2(RENAME_EXCHANGE)``.
What was swapped out (now under the temporary name) is then hashed: the base digest means the
change is applied; anything else is exchanged back, so another writer's bytes are never lost.
A reader of the destination sees the whole old file or the whole new one, never a mix or nothing.

A delete renames the destination to the temporary name (``RENAME_NOREPLACE``), hashes it, and
removes it (once the outcome is recorded) only if it holds the base; otherwise renames it back.

Exactly once: the temporary name is the evidence a crash leaves behind. An attempt that finds it
decides from the disk (``_recover_change``, ``_recover_delete``): base bytes at the temporary name
and the result at the destination mean "already swapped"; the result bytes are computed once, at
proposal time, so a repeated attempt can only ever write the same bytes over the same base.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gatekeeper.commit import fsops
from gatekeeper.commit.switches import Switches
from gatekeeper.workspace import syscalls
from gatekeeper.workspace.probe import probe

TMP_RE = re.compile(r"^\.gatekeeper-([0-9A-Za-z]+)\.new$")
NOTHING = "nothing was written"


def tmp_name(proposal_id: str) -> str:
    """The one temporary name an attempt at this proposal ever uses (recovery looks for it)."""
    return f".gatekeeper-{proposal_id}.new"


@dataclass(frozen=True)
class Look:
    kind: str  # file, missing, symlink, folder, other
    sha256: str | None = None  # None unless a regular file of one of the sizes asked about
    size: int = 0
    mode: int = 0
    uid: int = -1
    gid: int = -1


def look(dirfd: int, name: str, sizes: set[int]) -> Look:
    """What holds ``name`` now, without following it; a regular file of one of ``sizes`` is hashed
    (of any other size it cannot hold the digests asked about, so it is not read)."""
    with probe(dirfd, name) as at:
        if at.kind != "file" or at.st is None:
            return Look(at.coarse)
        st = at.st
        digest = None
        if st.st_size in sizes:
            h = hashlib.sha256()
            while chunk := os.read(at.fd, 1 << 20):
                h.update(chunk)
            digest = h.hexdigest()
        return Look("file", digest, st.st_size, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


@dataclass(frozen=True)
class Done:
    """What an attempt did. ``sync``: the folder changed, fsync it before recording the outcome.
    ``leftover``: a temporary name holding the base bytes, to remove once the outcome is recorded.
    ``busy``: another attempt holds the temporary name now; leave the proposal for a later pass."""

    outcome: str  # applied, deleted, conflict, or "" with busy
    detail: str = ""
    observed_sha256: str | None = None
    sync: bool = False
    leftover: str | None = None
    busy: bool = False


@dataclass(frozen=True)
class Change:
    """One approved change, as the file step needs it."""

    proposal_id: str
    path: str  # workspace-relative, for messages
    name: str  # last component, in the open folder
    mode: str  # replace, append, edit, delete
    data: bytes  # the result (empty for delete)
    sha256: str
    base_sha256: str
    base_size: int
    file_mode: int | None  # the rule's explicit file_mode; None keeps the file's own
    has_intent: bool  # an earlier attempt was interrupted after its intent

    @property
    def sizes(self) -> set[int]:
        return {self.base_size, len(self.data)}


def _changed(c: Change, now: Look, when: str = "since it was proposed") -> str:
    if now.kind == "file":
        which = f"sha256 {now.sha256[:16]}…" if now.sha256 else f"{now.size:,} bytes"
        got = f"it now holds other bytes ({which}, not the base {c.base_sha256[:16]}…)"
    else:
        got = _not_a_file(c.path, now)
    return f"changed {when}: {got}; {NOTHING}; propose the change again over the file as it is now"


def _not_a_file(path: str, now: Look) -> str:
    return {
        "missing": f"{path!r} no longer exists",
        "symlink": f"{path!r} is now a symbolic link (Gatekeeper never follows links)",
        "folder": f"{path!r} is now a folder",
        "other": f"{path!r} is now not a regular file (a FIFO, socket or device)",
    }.get(now.kind, f"{path!r} is not a regular file")


def _unlink(dirfd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dirfd)


# -- replace, append, edit ------------------------------------------------------------------


def apply_change(dirfd: int, c: Change, sw: Switches) -> Done:
    """Swap ``c.data`` in for the destination if, and only if, the destination holds the base."""
    tmp = tmp_name(c.proposal_id)
    leftover = look(dirfd, tmp, c.sizes)
    if leftover.kind != "missing":
        done = _recover_change(dirfd, c, tmp, leftover, sw)
        if done is not None:
            return done
    now = look(dirfd, c.name, c.sizes)
    if now.kind != "file":
        return Done("conflict", _changed(c, now))
    if now.sha256 != c.base_sha256:
        if now.sha256 == c.sha256 and c.has_intent:
            detail = "reconciled: the file already holds exactly the approved result (an interrupted earlier attempt)"
            return Done("applied", detail, c.sha256, sync=True)
        return Done("conflict", _changed(c, now), now.sha256)
    if not _write_tmp(dirfd, tmp, c, now, sw):
        return Done("", busy=True)
    sw.point("after_tmp_link")
    try:
        syscalls.renameat2_exchange(dirfd, tmp, c.name)
    except FileNotFoundError:  # the destination vanished since it was looked at
        _unlink(dirfd, tmp)
        return Done("conflict", _changed(c, look(dirfd, c.name, c.sizes), "while it was being applied"))
    sw.point("after_exchange")
    return _check_swapped(dirfd, c, tmp, sw)


def _write_tmp(dirfd: int, tmp: str, c: Change, now: Look, sw: Switches) -> bool:
    """The result in a new inode, mode and owner as the file it replaces, durable, named ``tmp``.
    False: ``tmp`` is taken (another attempt at the same proposal is running).

    Without ``O_TMPFILE``: written under ``tmp`` itself; a kill leaves a partial file there, which
    is never swapped in (a later attempt finds neither base nor result in it and starts over)."""
    named = sw.no_tmpfile
    if not named:
        try:
            fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
        except OSError as exc:
            if exc.errno not in fsops.NO_TMPFILE:
                raise
            named = True
    if named:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
        except FileExistsError:
            return False
    try:
        sw.point("after_tmp_open")
        os.fchmod(fd, now.mode if c.file_mode is None else c.file_mode)
        if (now.uid, now.gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # only root (or CAP_CHOWN) may give a file away
                os.fchown(fd, now.uid, now.gid)
        fsops.write_all(fd, c.data)
        sw.point("after_tmp_write")
        fsops.fsync(fd, f"the new version of {c.path!r}", "file", sw)
        sw.point("after_tmp_fsync")
        if named:
            return True
        try:
            syscalls.link_fd(fd, dirfd, tmp)
        except FileExistsError:
            return False
        return True
    finally:
        os.close(fd)


def _check_swapped(dirfd: int, c: Change, tmp: str, sw: Switches, *, recovered: bool = False) -> Done:
    """After the exchange: what went out must be the base; otherwise put it back."""
    out = look(dirfd, tmp, c.sizes)
    if out.kind == "file" and out.sha256 == c.base_sha256:
        detail = "recovered: an interrupted attempt had already swapped the change in" if recovered else ""
        return Done("applied", detail, c.sha256, sync=True, leftover=tmp)
    syscalls.renameat2_exchange(dirfd, tmp, c.name)
    sw.point("after_exchange_back")
    _unlink(dirfd, tmp)
    detail = _changed(c, out, "during the swap" if not recovered else "before an interrupted attempt's swap")
    return Done("conflict", detail + " (the other writer's bytes were put back)", out.sha256, sync=True)


def _recover_change(dirfd: int, c: Change, tmp: str, leftover: Look, sw: Switches) -> Done | None:
    """An earlier attempt left ``tmp``: decide from the disk. None: nothing was swapped, start over."""
    if leftover.kind != "file":
        return Done("conflict", f"something that is not a regular file is at Gatekeeper's temporary name {tmp!r} "
                    f"beside {c.path!r}; remove it and propose again; {NOTHING}")  # fmt: skip
    now = look(dirfd, c.name, c.sizes)
    if now.kind == "file" and now.sha256 == c.sha256 and leftover.sha256 != c.sha256:
        return _check_swapped(dirfd, c, tmp, sw, recovered=True)  # swapped, not yet checked or recorded
    if leftover.sha256 == c.base_sha256 and now.sha256 != c.sha256:
        _unlink(dirfd, tmp)  # swapped, then someone changed the file again: theirs stays, the base is in the store
        return Done(
            "conflict",
            f"an interrupted attempt had swapped the change in, but {c.path!r} was changed again since "
            "(by someone else); that newer file was left as it is",
            now.sha256,
            sync=True,
        )
    _unlink(dirfd, tmp)  # the result, linked but never swapped in (or swapped back): start over
    return None


# -- delete ----------------------------------------------------------------------------------


def delete_file(dirfd: int, c: Change, sw: Switches) -> Done:
    """Remove the destination if, and only if, it holds the base; nothing else leaves the tree."""
    tmp = tmp_name(c.proposal_id)
    aside = look(dirfd, tmp, c.sizes)
    if aside.kind != "missing":
        return _recover_delete(dirfd, c, tmp, aside, sw)
    now = look(dirfd, c.name, c.sizes)
    if now.kind != "file" or now.sha256 != c.base_sha256:
        return Done("conflict", _changed(c, now), now.sha256)
    try:
        syscalls.renameat2_noreplace(dirfd, c.name, dirfd, tmp)
    except FileNotFoundError:
        return Done("conflict", _changed(c, look(dirfd, c.name, c.sizes), "while it was being deleted"))
    except FileExistsError:
        return Done("", busy=True)
    sw.point("after_move_aside")
    return _delete_aside(dirfd, c, tmp, look(dirfd, tmp, c.sizes), sw)


def _delete_aside(dirfd: int, c: Change, tmp: str, aside: Look, sw: Switches, *, recovered: bool = False) -> Done:
    if aside.kind == "file" and aside.sha256 == c.base_sha256:
        # Removed only once the outcome is recorded: until then the name is the evidence that this
        # attempt took the file away (an absent file alone proves nothing: it may never have been there).
        detail = "recovered: an interrupted attempt had already moved the file aside" if recovered else ""
        if recovered and look(dirfd, c.name, set()).kind != "missing":
            detail += f"; something new has appeared at {c.path!r} since, and was left as it is"
        return Done("deleted", detail, c.base_sha256, sync=True, leftover=tmp)
    detail = _changed(c, aside, "during the delete")
    try:
        syscalls.renameat2_noreplace(dirfd, tmp, dirfd, c.name)
    except FileExistsError:
        detail += (
            f"; something new also took the name {c.path!r} meanwhile: both were left, the other bytes "
            f"under {tmp!r} beside it"
        )
    return Done("conflict", detail + " (the other writer's bytes were put back)", aside.sha256, sync=True)


def _recover_delete(dirfd: int, c: Change, tmp: str, aside: Look, sw: Switches) -> Done:
    if aside.kind != "file":
        return Done("conflict", f"something that is not a regular file is at Gatekeeper's temporary name {tmp!r} "
                    f"beside {c.path!r}; remove it and propose again; {NOTHING}")  # fmt: skip
    return _delete_aside(dirfd, c, tmp, aside, sw, recovered=True)


def sweep(dirfd: int, state_of: Callable[[str], dict[str, Any] | None]) -> None:
    """Remove temporary names left by attempts killed after their outcome was recorded. Only a name
    holding that proposal's own base or result is removed; one of an unfinished proposal (its
    recovery needs it) or holding anything else (another writer's bytes, put aside) stays."""
    for name, pid in stale_names(dirfd):
        state = state_of(pid)
        if state is None or state["outcome"] is None:
            continue
        ours = {state["sha256"], state["base_sha256"]}
        if look(dirfd, name, {state["size"], state["base_size"] or 0}).sha256 in ours:
            _unlink(dirfd, name)


def stale_names(dirfd: int) -> list[tuple[str, str]]:
    """``(name, proposal id)`` of every temporary name in the folder."""
    out = []
    with os.scandir(dirfd) as entries:
        for e in entries:
            m = TMP_RE.match(e.name)
            if m and e.is_file(follow_symlinks=False):
                out.append((e.name, m.group(1)))
    return out
