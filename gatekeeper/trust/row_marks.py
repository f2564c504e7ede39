"""The newest change this home signed for each reviewer and passkey row: ``<home>/signed-rows``.

A signed row is accepted for its latest change event (``signed_rows.py``). A database writer
without the key can still put an older, validly signed row back (the password hash from before a
password change, the enabled row of a reviewer since disabled, a removed passkey) and cut the
later change event from the chain, renumbering and rehashing what follows: the old row is then
the latest again, and only a signed checkpoint shows it, afterwards, and only for events older
than the newest checkpoint. The home that signs each change keeps the change's seq here, outside
the database, as soon as it is committed; a row whose latest signed change is older than that is
refused at once, at log-in and at approval, whatever the chain says now. The seq a signature
covers is the row's version: it only ever grows.

A JSON object ``{"reviewer:NAME": seq, "passkey:CREDENTIAL": seq}``, replaced atomically under a
lock (``signed-rows.lock``) by every process of the home that signs (``reviewer passwd``, the
review page enrolling a passkey), read on every check.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from gatekeeper.errors import GatekeeperError

MARKS_NAME = "signed-rows"


def marks_path(keys_dir: Path) -> Path:
    """Beside the ``keys/`` folder, in the home."""
    return keys_dir.parent / MARKS_NAME


def read_marks(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise GatekeeperError(
            f"cannot read {path}, the newest reviewer and passkey changes this home signed ({exc})",
            "restore it from a backup, or delete it to trust the rows in the database as they are",
        ) from None
    if not isinstance(data, dict):
        raise GatekeeperError(f"{path} is not what Gatekeeper writes", "delete it to trust the rows as they are")
    return {str(k): int(v) for k, v in data.items() if isinstance(v, int)}


def mark_for(keys_dir: Path | None, what: str, name: str) -> int:
    """The seq of the newest change of this row signed here (0: none known)."""
    return 0 if keys_dir is None else read_marks(marks_path(keys_dir)).get(f"{what}:{name}", 0)


def remember(keys_dir: Path | None, what: str, name: str, seq: int) -> None:
    """After the change at ``seq`` is committed: raise this row's mark to it (never lower it)."""
    if keys_dir is None:
        return
    path = marks_path(keys_dir)
    lock = os.open(path.with_name(MARKS_NAME + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marks = read_marks(path)
        key = f"{what}:{name}"
        if marks.get(key, 0) >= seq:
            return
        marks[key] = seq
        tmp = path.with_name(f".{MARKS_NAME}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (json.dumps(marks, sort_keys=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    finally:
        os.close(lock)
