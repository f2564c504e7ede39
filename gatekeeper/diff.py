"""What a change does to a file, as a person reads it: a unified diff from base to result.

Pure functions over bytes, shared by the proxy (an edit's dry run answers with the diff) and the
review page (which renders the same hunks with line numbers and invisible-character marks).
"""

from __future__ import annotations

import difflib


def as_text(data: bytes) -> str | None:
    """The bytes as text, or None when they are not UTF-8 (or hold NUL): such a file is binary."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def unified(base: bytes, result: bytes, path: str, context: int = 3) -> str:
    """A ``diff -u`` of ``path`` from base to result; binary files get one line that says so."""
    old, new = as_text(base), as_text(result)
    if old is None or new is None:
        return f"Binary file {path}: {len(base):,} bytes → {len(result):,} bytes\n"
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=context
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
