"""A change set: every file and folder one shadowed call changed, and the digest a decision signs.

A shadow write runs the server's own code in a sandbox; what it left behind is read back as a
change set (``gatekeeper.shadow`` builds it). Each entry names one path relative to the
workspace and what happened there, with the exact bytes before (the base the server saw) and
after (the result). The review page shows it, the decision signs :meth:`ChangeSet.digest`, and
the committer applies it all or nothing. Pure data: no I/O.

Operations:

- ``create``: a file that did not exist (``base`` is None).
- ``change``: a file whose bytes or mode changed.
- ``delete``: a file removed (``result`` is None).
- ``move``: the file at ``source`` now at ``path`` (``base`` the bytes at ``source``, ``result``
  the bytes at ``path``; equal for a plain move, and the mode may differ).
- ``mkdir`` / ``rmdir``: a folder made or removed (no bytes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from gatekeeper.canonical import canonical_bytes

__all__ = ["OPS", "ChangeSet", "FileChange", "Op", "sha256_of"]

Op = Literal["create", "change", "delete", "move", "mkdir", "rmdir"]
OPS: tuple[Op, ...] = ("create", "change", "delete", "move", "mkdir", "rmdir")
_FOLDER_OPS = frozenset({"mkdir", "rmdir"})


def sha256_of(data: bytes | None) -> str | None:
    """Hex sha256 of ``data``; None stays None (nothing there)."""
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class FileChange:
    """What happened at one path. ``mode``/``base_mode`` are permission bits (``0o644``), or None."""

    path: str
    op: Op
    base: bytes | None = None
    result: bytes | None = None
    mode: int | None = None
    base_mode: int | None = None
    source: str | None = None
    base_sha256: str | None = field(init=False)
    result_sha256: str | None = field(init=False)

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown change-set operation {self.op!r} (one of {', '.join(OPS)})")
        needs_base = self.op in ("change", "delete", "move")
        needs_result = self.op in ("create", "change", "move")
        if (self.base is not None) != needs_base or (self.result is not None) != needs_result:
            takes = " and ".join(n for n, on in (("base", needs_base), ("result", needs_result)) if on) or "no bytes"
            raise ValueError(f"{self.path}: {self.op} takes {takes}")
        if (self.source is not None) != (self.op == "move"):
            raise ValueError(f"{self.path}: only a move names a source")
        object.__setattr__(self, "base_sha256", sha256_of(self.base))
        object.__setattr__(self, "result_sha256", sha256_of(self.result))

    @property
    def is_folder(self) -> bool:
        return self.op in _FOLDER_OPS

    def signed(self) -> dict[str, Any]:
        """The fields a decision binds: everything the committer acts on, no bytes (their digests)."""
        return {
            "path": self.path,
            "op": self.op,
            "source": self.source,
            "base_sha256": self.base_sha256,
            "result_sha256": self.result_sha256,
            "mode": self.mode,
            "base_mode": self.base_mode,
        }


@dataclass(frozen=True)
class ChangeSet:
    """The entries of one call, in path order (a move sorts by its destination)."""

    files: tuple[FileChange, ...]

    @classmethod
    def of(cls, files: Iterable[FileChange]) -> ChangeSet:
        ordered = tuple(sorted(files, key=lambda f: (f.path, f.op)))
        seen: set[str] = set()
        for f in ordered:
            for name in (f.path, f.source):
                if name is None:
                    continue
                if name in seen:
                    raise ValueError(f"{name} appears twice in one change set")
                seen.add(name)
        return cls(ordered)

    def __iter__(self) -> Iterator[FileChange]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def digest(self) -> str:
        """sha256 of the canonical JSON of every entry's signed fields: what an approval binds."""
        return hashlib.sha256(canonical_bytes([f.signed() for f in self.files])).hexdigest()

    def counts(self) -> dict[str, int]:
        """How many entries of each operation, for a summary ("1 moved, 2 changed")."""
        out: dict[str, int] = {}
        for f in self.files:
            out[f.op] = out.get(f.op, 0) + 1
        return out

    def inverse(self) -> ChangeSet:
        """The set that undoes this one once applied: what ``gatekeeper revert`` proposes.

        Each entry's result becomes the base it must find, and its base the result it writes back.
        """
        return ChangeSet.of(_inverse(f) for f in self.files)

    def total_bytes(self) -> int:
        """Bytes the set carries (bases and results): what the store keeps for it."""
        return sum(len(f.base or b"") + len(f.result or b"") for f in self.files)


_UNDO: dict[str, Op] = {
    "create": "delete",
    "delete": "create",
    "change": "change",
    "move": "move",
    "mkdir": "rmdir",
    "rmdir": "mkdir",
}


def _inverse(f: FileChange) -> FileChange:
    op = _UNDO[f.op]
    if op == "move":
        assert f.source is not None
        return FileChange(f.source, "move", f.result, f.base, f.base_mode, f.mode, source=f.path)
    return FileChange(f.path, op, f.result, f.base, f.base_mode, f.mode)
