"""The temporary names a killed committer may leave behind, found again by the next one.

A change's or delete's temporary name (``.gatekeeper-<id>.new``, swap.py) holds the base bytes
until the outcome is recorded: it is the evidence an interrupted attempt is recovered from. It is
removed right after the outcome transaction (``Committer._clean_up``), so a kill between the two
left it, and its proposal, finished, is never looked at again: the name stayed in the workspace
until the next change in that folder was committed. Now, before recording a batch's outcomes, the
committer notes the folders that hold such names in a small file beside its locks (one per server,
``commit-SERVER.leftovers``: committers of other servers run beside it), and removes the file once
they are cleaned. A pass that finds a file sweeps its folders first (``swap.sweep``: only names of
proposals with an outcome, holding that proposal's own base or result bytes, go).

The file is not fsynced: a power cut may lose it, and then a name waits for its folder's next
change, as it did before.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gatekeeper.commit import swap
from gatekeeper.workspace import beneath

StateOf = Callable[[str], dict[str, Any] | None]
_SUFFIX = ".leftovers"


class Leftovers:
    """``commit-SERVER.leftovers`` files in ``folder`` (the home): ``[[workspace, folder], ...]``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _file(self, server: str) -> Path:
        return self.folder / f"commit-{server}{_SUFFIX}"

    def note(self, places: Iterable[tuple[str, Path, str]]) -> list[Path]:
        """Before the outcomes are recorded: ``(server, workspace, path)`` of each temporary name
        this batch leaves. Returns the files written, for ``cleared``."""
        by_server: dict[str, set[tuple[str, str]]] = {}
        for server, workspace, path in places:
            by_server.setdefault(server, set()).add((str(workspace), path.rpartition("/")[0]))
        written = []
        for server, folders in by_server.items():
            file = self._file(server)
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(sorted(folders), out)
            written.append(file)
        return written

    @staticmethod
    def cleared(files: list[Path]) -> None:
        """The names are removed: forget them."""
        for file in files:
            with contextlib.suppress(FileNotFoundError):
                file.unlink()

    def sweep(self, servers: frozenset[str] | None, state_of: StateOf) -> None:
        """Before a pass: sweep the folders a killed committer of these servers (None: any) noted."""
        try:
            found = [p for p in self.folder.iterdir() if p.name.startswith("commit-") and p.name.endswith(_SUFFIX)]
        except OSError:
            return
        for file in found:
            server = file.name[len("commit-") : -len(_SUFFIX)]
            if servers is not None and server not in servers:
                continue  # another committer's, which may be running now
            if all(_sweep_folder(workspace, folder, state_of) for workspace, folder in _entries(file)):
                self.cleared([file])


def _entries(file: Path) -> list[tuple[str, str]]:
    """The noted folders; a file cut short by the kill reads as none."""
    try:
        entries = json.loads(file.read_text(encoding="utf-8"))
        return [(str(w), str(f)) for w, f in entries]
    except (OSError, ValueError, TypeError):
        return []


def _sweep_folder(workspace: str, folder: str, state_of: StateOf) -> bool:
    """Sweep one folder beneath its workspace (no symbolic link followed). False: it cannot be opened
    now (keep the note for a later pass); a folder that is gone has nothing left to sweep."""
    try:
        root = beneath.open_root(Path(workspace))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        dirfd = beneath.open_folder(root, folder.split("/") if folder else [])
    except (FileNotFoundError, beneath.InTheWay):
        return True
    except OSError:
        return False
    finally:
        os.close(root)
    try:
        swap.sweep(dirfd, state_of)
    except OSError:
        return False
    finally:
        os.close(dirfd)
    return True
