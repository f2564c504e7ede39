"""Workspace globs: the one matcher every allow-list of paths goes through.

``fnmatch`` lets ``*`` cross folders and has no ``**``; a proposal's destination must never
escape the folders a rule names, so this module has its own small, strict dialect.
"""

from __future__ import annotations

import functools
import re

__all__ = ["check_glob", "glob_match"]


def _glob_component(part: str, pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            start = i + 2 if part[i + 1 : i + 2] in ("!", "^") else i + 1
            end = part.find("]", start + 1)  # a ']' right after '[' or '[!' is a literal
            if end < 0:
                raise ValueError(f"glob {pattern!r} has an unclosed '['")
            negate = start > i + 1
            body = part[start:end]
            for special in "\\^[]":
                body = body.replace(special, "\\" + special)
            # (?!/) keeps a class such as [!a] or [--0] from ever matching the separator.
            out.append(f"(?!/)[{'^' if negate else ''}{body}]")
            i = end
        elif ch == "\\":
            raise ValueError(f"glob {pattern!r} contains '\\': separate folders with '/', write [*] for a literal *")
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob to a regex: ``**`` spans folders, ``*``, ``?`` and ``[..]`` never cross '/'.

    ``a/**/b`` and ``**/b`` let ``**`` stand for zero or more folders; a trailing ``a/**`` means
    "anything inside a" (at least one component), so it never matches a file named ``a``.
    """
    if pattern == "**":
        return re.compile(".*", re.DOTALL)
    parts = pattern.split("/")
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            if last:
                regex += "(?:/[^/]+)+" if index else ".*"
            else:
                regex += "(?:[^/]+/)*" if index == 0 else "/(?:[^/]+/)*"
            continue
        if index and parts[index - 1] != "**":
            regex += "/"
        regex += _glob_component(part, pattern)
    return re.compile(regex, re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """True if the workspace-relative POSIX ``path`` matches ``pattern`` (see ``_glob_regex``)."""
    return _glob_regex(pattern).fullmatch(path) is not None


def check_glob(pattern: str) -> str:
    """Return ``pattern`` if it is a usable workspace glob; else raise ``ValueError`` saying why."""
    if not pattern:
        raise ValueError("a glob must not be empty (use '**' for any file)")
    if pattern.startswith("/"):
        raise ValueError(f"glob {pattern!r} must be relative to the workspace (drop the leading '/')")
    parts = pattern.split("/")
    if "" in parts:
        raise ValueError(f"glob {pattern!r} has an empty folder name ('//' or a trailing '/')")
    if "." in parts or ".." in parts:
        raise ValueError(f"glob {pattern!r} must not contain '.' or '..' folders (paths are normalised first)")
    try:
        _glob_regex(pattern)
    except re.error as exc:
        raise ValueError(str(exc)) from None
    return pattern
