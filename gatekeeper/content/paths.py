"""Destination paths as text: the first of two layers (the kernel's openat2 flags are the second).

A destination must be a plain relative POSIX path beneath the workspace, made of names that
mean the same on every file system a workspace might be synced to, and that a reviewer cannot
misread. Anything else is refused with the reason and what to change. No I/O here except
``check_existing``, which looks (without following symlinks) at what is on disk now.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path, PurePosixPath

from gatekeeper.content import invisible
from gatekeeper.errors import InvalidInput

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 1024
MAX_DEPTH = 32

_WINDOWS_RESERVED = {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}
_FORBIDDEN_CHARS = set('<>:"|?*\\')
# Characters that look like "/" or "." (or a space) to a reviewer but are something else.
_LOOKALIKES = {
    "\u2215": "DIVISION SLASH",
    "\u2044": "FRACTION SLASH",
    "\u29f8": "BIG SOLIDUS",
    "\uff0f": "FULLWIDTH SOLIDUS",
    "\u2571": "BOX DRAWINGS DIAGONAL",
    "\u27cb": "MATHEMATICAL RISING DIAGONAL",
    "\u2024": "ONE DOT LEADER",
    "\uff0e": "FULLWIDTH FULL STOP",
    "\u3002": "IDEOGRAPHIC FULL STOP",
    "\ufe52": "SMALL FULL STOP",
    "\u0701": "SYRIAC SUPRALINEAR FULL STOP",
    "\u00a0": "NO-BREAK SPACE",
    "\u2000": "EN QUAD",
    "\u3000": "IDEOGRAPHIC SPACE",
}


class PathRefused(InvalidInput):
    """A destination that Gatekeeper will not propose; the message says what to change."""


def _refuse(raw: str, why: str, hint: str) -> PathRefused:
    return PathRefused(f"destination {invisible.escaped(raw)} refused: {why}", hint)


def normalise_destination(raw: object, workspace: Path) -> str:
    """Return the workspace-relative POSIX path for ``raw``, or raise ``PathRefused``."""
    if not isinstance(raw, str):
        raise PathRefused(f"destination must be a string, got {type(raw).__name__}", "pass a relative path")
    if raw == "":
        raise _refuse(raw, "it is empty", "pass a relative path such as notes/idea.md")
    _check_characters(raw)
    text = raw
    if text.startswith("/"):
        root = str(workspace).rstrip("/") + "/"
        if not text.startswith(root):
            raise _refuse(
                raw,
                f"it is an absolute path outside the workspace {workspace}",
                "pass a path relative to the workspace",
            )
        text = text[len(root) :]
    if len(text.encode("utf-8")) > MAX_PATH_BYTES:
        raise _refuse(raw, f"it is longer than {MAX_PATH_BYTES} bytes", "use a shorter path")
    parts = text.split("/")
    if len(parts) > MAX_DEPTH:
        raise _refuse(raw, f"it is nested more than {MAX_DEPTH} folders deep", "use a shallower path")
    for part in parts:
        _check_component(raw, part)
    return str(PurePosixPath(*parts))


def _check_characters(raw: str) -> None:
    """Refuse what would make the name read differently on the page than on disk."""
    for position, ch in enumerate(raw, start=1):
        if ch in _LOOKALIKES:
            raise _refuse(
                raw,
                f"it contains U+{ord(ch):04X} {_LOOKALIKES[ch]} at position {position}, "
                "which looks like another character",
                "use plain ASCII '/' and '.', and plain single spaces",
            )
        what = invisible.kind(ch)
        if what is not None:
            raise _refuse(
                raw,
                f"it contains {invisible.code_point(ch)} {invisible.name(ch)} ({what}) at position {position}",
                "use plain spaces (U+0020), one at a time"
                if unicodedata.category(ch) == "Zs"
                else "use visible characters only; a name must read the same on the page as on disk",
            )
        if ch in _FORBIDDEN_CHARS:
            raise _refuse(
                raw,
                f"it contains {ch!r}, which is not allowed in names",
                "use '/' between folders, and no < > : \" | ? * \\",
            )
    run = raw.find("  ")
    if run >= 0:
        length = len(raw[run:]) - len(raw[run:].lstrip(" "))
        raise _refuse(
            raw,
            f"it has {length} spaces in a row at position {run + 1}, which a reader takes for one",
            "use single spaces between words",
        )
    if unicodedata.normalize("NFKC", raw) != raw:
        raise _refuse(
            raw,
            "it contains compatibility characters (look-alike letters or symbols)",
            f"write it as {unicodedata.normalize('NFKC', raw)!r} if that is what you mean",
        )


def _check_component(raw: str, part: str) -> None:
    if part == "":
        raise _refuse(
            raw,
            "it has an empty component ('//', or a leading or trailing '/')",
            "write it as folder/name with single slashes",
        )
    if part in (".", ".."):
        raise _refuse(raw, f"it contains {part!r}", "name the destination directly, inside the workspace")
    if part.startswith("."):
        raise _refuse(raw, f"{part!r} is a hidden name (like .git or .env)", "use a name that does not start with '.'")
    if part != part.strip(" "):
        where = "starts" if part.startswith(" ") else "ends"
        raise _refuse(
            raw,
            f"the name {invisible.escaped(part)} {where} with a space, which a reader cannot see",
            "remove the space at the start or end of each name",
        )
    if part.endswith("."):
        raise _refuse(raw, f"the name {invisible.escaped(part)} ends with a dot", "remove the trailing dot")
    if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
        raise _refuse(raw, f"a component is longer than {MAX_COMPONENT_BYTES} bytes", "use a shorter name")
    if part.split(".")[0].lower() in _WINDOWS_RESERVED:
        raise _refuse(raw, f"{part!r} is a reserved device name on Windows", "pick another name")


def check_existing(workspace: Path, rel: str) -> None:
    """Refuse a destination that exists now, or whose parents are not plain folders.

    Uses ``lstat`` component by component: a symlink anywhere on the way is refused, not followed.
    """
    if not workspace.is_dir():
        raise InvalidInput(f"the workspace {workspace} does not exist", "create it, or fix `workspace` in policy.yaml")
    current = workspace
    parts = rel.split("/")
    for i, part in enumerate(parts):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode):
            where = "the destination" if last else f"the folder {'/'.join(parts[: i + 1])!r}"
            raise _refuse(rel, f"{where} is a symbolic link", "pick a path without symbolic links")
        if last:
            raise _refuse(
                rel,
                "a file with that name already exists in the workspace",
                "pick a new name; Gatekeeper only creates new files, it never overwrites",
            )
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(rel, f"{'/'.join(parts[: i + 1])!r} is a file, not a folder", "pick another folder")
