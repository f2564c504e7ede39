"""workspace/probe.py: every kind of thing at a name - file, folder, symlink, FIFO, socket, missing,
and a name blocked by a symlink on the way - is told apart the same way by every user of the probe:
the read-only reader (proxy, review page, revert), the committer's create check and its swap check."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gatekeeper.commit import fsops, swap
from gatekeeper.commit.switches import OFF
from gatekeeper.workspace import beneath
from gatekeeper.workspace.probe import probe
from gatekeeper.workspace.reading import read_at


def _file(root: Path) -> None:
    (root / "x").write_bytes(b"hello")


def _folder(root: Path) -> None:
    (root / "x").mkdir()


def _symlink(root: Path) -> None:
    (root / "x").symlink_to(root.parent / "outside")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "x")


def _socket(root: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(root / "x"))
    s.close()


# kind -> (make it, what the probe says, what the reader says, what the create check says)
KINDS: dict[str, tuple[Callable[[Path], None], str, str, str]] = {
    "file": (_file, "file", "file", "file"),
    "folder": (_folder, "folder", "folder", "folder"),
    "symlink": (_symlink, "symlink", "symlink", "symlink"),
    "fifo": (_fifo, "fifo", "other", "other"),
    "socket": (_socket, "socket", "other", "other"),
    "missing": (lambda root: None, "missing", "missing", "gone"),
}


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    # A short path: a unix socket's name is limited to ~100 bytes.
    base = Path(os.path.relpath(tmp_path))
    ws = base / "ws"
    ws.mkdir()
    (base / "outside").write_bytes(b"secret")
    yield ws


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_is_told_apart_the_same_way_by_every_user(root: Path, kind: str) -> None:
    make, probed, coarse, created = KINDS[kind]
    make(root)
    fd = beneath.open_root(root)
    try:
        with probe(fd, "x") as at:
            assert (at.kind, at.coarse) == (probed, coarse)
            assert (at.fd >= 0) == (kind == "file")
        assert read_at(root, "x", 100).kind == coarse
        assert swap.look(fd, "x", {5}).kind == coarse
        assert fsops.inspect(fd, "x", "0" * 64, 5, OFF).kind == created
    finally:
        os.close(fd)


def test_a_name_behind_a_symlinked_folder_is_blocked_for_every_user(root: Path) -> None:
    (root.parent / "elsewhere").mkdir()
    (root.parent / "elsewhere" / "x").write_bytes(b"outside")
    (root / "d").symlink_to(root.parent / "elsewhere")
    assert read_at(root, "d/x", 100).kind == "blocked"
    fd = beneath.open_root(root)
    try:
        for create in (False, True):
            with pytest.raises(beneath.InTheWay, match="'d' is a symbolic link"):
                fsops.open_dir(fd, ["d"], OFF, create=create)
        with pytest.raises(beneath.InTheWay, match="'d' is a symbolic link"):
            beneath.open_folder(fd, ["d"])
    finally:
        os.close(fd)
