"""workspace/reading.py: what is at a workspace path now, on a real file system, never following a symlink."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from gatekeeper.workspace.reading import Found, read_at


def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "notes").mkdir(parents=True)
    return root


def test_a_regular_file_is_read_whole_with_its_mode(tmp_path: Path) -> None:
    root = ws(tmp_path)
    (root / "notes/a.md").write_bytes(b"\x00binary\xff and text\n")
    os.chmod(root / "notes/a.md", 0o640)
    found = read_at(root, "notes/a.md", 100)
    assert found == Found("file", b"\x00binary\xff and text\n", 18, 0o640)
    assert not found.too_large


def test_an_empty_file_is_a_file(tmp_path: Path) -> None:
    root = ws(tmp_path)
    (root / "empty").write_bytes(b"")
    assert read_at(root, "empty", 0) == Found("file", b"", 0, 0o644 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_missing_file_and_missing_folder(tmp_path: Path) -> None:
    root = ws(tmp_path)
    assert read_at(root, "notes/none.md", 100).kind == "missing"
    assert read_at(root, "no/such/folder/x.md", 100).kind == "missing"


def test_a_symlink_to_a_file_is_not_followed(tmp_path: Path) -> None:
    root = ws(tmp_path)
    (tmp_path / "secret").write_bytes(b"outside")
    (root / "notes/link.md").symlink_to(tmp_path / "secret")
    (root / "inside.md").write_bytes(b"inside")
    (root / "notes/rel.md").symlink_to("../inside.md")
    for rel in ("notes/link.md", "notes/rel.md"):
        found = read_at(root, rel, 100)
        assert found.kind == "symlink" and found.data is None


def test_a_symlinked_parent_folder_blocks(tmp_path: Path) -> None:
    root = ws(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.md").write_bytes(b"outside")
    (root / "linked").symlink_to(outside)
    found = read_at(root, "linked/x.md", 100)
    assert found.kind == "blocked" and found.data is None
    assert "linked" in found.detail


def test_a_file_where_a_folder_should_be_blocks(tmp_path: Path) -> None:
    root = ws(tmp_path)
    (root / "plain").write_bytes(b"x")
    found = read_at(root, "plain/x.md", 100)
    assert found.kind == "blocked" and "plain" in found.detail


def test_a_fifo_is_other_and_reading_it_does_not_block(tmp_path: Path) -> None:
    root = ws(tmp_path)
    os.mkfifo(root / "notes/pipe")
    assert read_at(root, "notes/pipe", 100) == Found("other")


def test_a_socket_is_other(tmp_path: Path) -> None:
    root = ws(tmp_path)
    path = root / "s"
    if len(str(path)) > 100:  # AF_UNIX path limit
        return
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        assert read_at(root, "s", 100) == Found("other")


def test_a_folder_is_a_folder(tmp_path: Path) -> None:
    root = ws(tmp_path)
    assert read_at(root, "notes", 100) == Found("folder")


def test_a_file_over_the_limit_is_not_read(tmp_path: Path) -> None:
    root = ws(tmp_path)
    (root / "big").write_bytes(b"x" * 101)
    found = read_at(root, "big", 100)
    assert found.too_large and found.size == 101 and found.data is None
    exact = read_at(root, "big", 101)
    assert exact.data == b"x" * 101 and not exact.too_large


def test_a_file_growing_while_read_is_whole_or_too_large(tmp_path: Path) -> None:
    """A writer appends while the reader reads: every answer is a prefix within the limit, or
    'too large'; never more than the limit in memory, never a torn mix."""
    root = ws(tmp_path)
    target = root / "grow.log"
    limit = 256 * 1024
    chunk = bytes(range(256)) * 64  # 16 KiB, a known pattern: any prefix is checkable
    target.write_bytes(chunk)
    stop, first_read = threading.Event(), threading.Event()

    def writer() -> None:
        # After the first read: on a loaded machine a free-running writer can pass the limit
        # before the reader's first look, and then no read within the limit is ever seen.
        first_read.wait(20)
        with open(target, "ab", buffering=0) as out:
            while not stop.is_set() and out.tell() < 4 * limit:
                out.write(chunk)

    thread = threading.Thread(target=writer)
    thread.start()
    seen_file = seen_large = False
    deadline = time.monotonic() + 20
    try:
        while not seen_large and time.monotonic() < deadline:
            found = read_at(root, "grow.log", limit)
            first_read.set()
            assert found.kind == "file"
            if found.too_large:
                assert found.data is None and found.size is not None and found.size > limit
                seen_large = True
            else:
                assert found.data is not None and len(found.data) <= limit and found.size == len(found.data)
                pattern = (chunk * (len(found.data) // len(chunk) + 1))[: len(found.data)]
                assert found.data == pattern
                seen_file = True
    finally:
        stop.set()
        thread.join()
    assert seen_file and seen_large
