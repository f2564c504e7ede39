"""PLANTED BUGS (tests only): deliberately broken variants of three committer steps.

The crash campaign (tests/test_commit_crash.py, ``make crash``) must catch each of them; that
is how we know it can catch a real one. Production code never imports this module: it asks
``Switches.step`` for a step's function, and only the test harness (``faults.from_env``, on
``GATEKEEPER_PLANT_BUG``) swaps one of these in (``BUGS``: name -> the step it replaces, the function).
Each keeps the crash points of the step it replaces, so kills land in the same places.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gatekeeper.canonical import now_ts
from gatekeeper.commit.fsops import Published, fsync, write_all
from gatekeeper.commit.swap import Change, Done, look
from gatekeeper.commit.switches import Switches
from gatekeeper.store import events as ev
from gatekeeper.store.store import Store


def in_place(dirfd: int, name: str, data: bytes, mode: int, sw: Switches) -> Published:
    """Replaces ``fsops.publish``: O_CREAT|O_EXCL under the final name, so a crash leaves a torn file."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirfd)
    except FileExistsError:
        return Published(False)
    try:
        sw.point("after_file_open")
        write_all(fd, data)
        sw.point("after_file_write")
        fsync(fd, f"the new file {name!r}", "file", sw)
        sw.point("after_file_fsync")
        sw.point("after_link")
        return Published(True, os.fstat(fd).st_ino)
    finally:
        os.close(fd)


def separate_event(store: Store, records: list[dict[str, Any]], actor: str, sw: Switches) -> dict[str, bool]:
    """Replaces ``committer.record_outcomes``: the row commits, then its audit event in a second transaction."""
    recorded: dict[str, bool] = {}
    for item in records:
        pid = item["proposal_id"]
        fields = {k: item[k] for k in ("outcome", "observed_sha256", "final_path", "detail")}
        try:
            with store.transaction() as tx:
                tx.insert("commit_record", {"proposal_id": pid, **fields, "at": now_ts()})
        except store.backend.integrity_errors:
            recorded[pid] = False
            continue
        sw.point("outcome_row_written")
        store.append_event(ev.COMMIT_OUTCOME, actor, fields, pid)
        recorded[pid] = True
    return recorded


def change_in_place(dirfd: int, c: Change, sw: Switches) -> Done:
    """Replaces ``swap.apply_change``: checks the base, then rewrites the file in place (``O_TRUNC``),
    so a crash leaves a torn file and a reader can see one."""
    now = look(dirfd, c.name, c.sizes)
    if now.kind != "file" or now.sha256 != c.base_sha256:
        return Done("conflict", "changed since it was proposed; nothing was written", now.sha256)
    fd = os.open(c.name, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        sw.point("after_tmp_open")
        write_all(fd, c.data)
        sw.point("after_tmp_write")
        fsync(fd, f"the file {c.path!r}", "file", sw)
        sw.point("after_tmp_fsync")
    finally:
        os.close(fd)
    return Done("applied", "", c.sha256, sync=True)


BUGS: dict[str, tuple[str, Callable[..., Any]]] = {
    "separate_event": ("record_outcomes", separate_event),
    "in_place": ("publish", in_place),
    "change_in_place": ("apply_change", change_in_place),
}
