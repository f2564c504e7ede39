"""The words of outcome details that are longer than a line: what a person reads in
``gatekeeper commit`` output, the audit log and the agent's status call."""

from __future__ import annotations

from gatekeeper.commit import fsops


def what_was_done(outcome: str, path: str, final_path: str | None) -> str:
    """The start of a ``failed`` detail when the folder's fsync failed after the file step."""
    if outcome == "deleted":
        return f"{path!r} was deleted"
    if outcome == "applied":
        return f"the change was swapped in at {final_path}"
    return f"the file was created at {final_path}"


def in_the_way(path: str, existing: fsops.Existing) -> str:
    """Why a create found its name taken: what is there, and what to do."""
    never = "Gatekeeper never overwrites"
    if existing.kind == "file":
        which = f"sha256 {existing.sha256[:16]}…" if existing.sha256 else f"{existing.size:,} bytes"
        return (
            f"a different file is already at {path!r} ({which}); {never}: "
            "move it away and propose again, or propose another name"
        )
    if existing.kind == "symlink":
        return f"a symbolic link is already at {path!r}; {never} and never follows links: remove it and propose again"
    if existing.kind == "folder":
        return f"a folder is already at {path!r}; propose another name"
    if existing.kind == "gone":
        return f"something was at {path!r} and vanished while it was being inspected; propose again"
    return f"something that is not a regular file (a FIFO, socket or device) is at {path!r}; {never}"
