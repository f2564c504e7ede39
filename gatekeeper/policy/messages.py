"""The wording of policy problems, shared by the validators and the loader.

Every mistake must reach the person as one line naming file, line and key path, with a
"did you mean" where one is close; keeping those phrases here keeps them consistent.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from pydantic_core import PydanticCustomError

__all__ = ["close_matches", "describe_value", "fail", "line_of", "locate", "suggest"]


def fail(message: str) -> NoReturn:
    """Raise a validation error whose text reaches the user as written (no pydantic prefix)."""
    raise PydanticCustomError("policy", "{message}", {"message": message})


def close_matches(word: object, choices: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)


def suggest(word: object, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` if one of ``choices`` is close to ``word``, else ``''``."""
    close = close_matches(word, choices)
    return f" (did you mean {close[0]!r}?)" if close else ""


def describe_value(value: object) -> str:
    """Describe a YAML value's type the way a person reading the file would."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string {shown!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def line_of(lines: Mapping[tuple[Any, ...], int], path: tuple[Any, ...]) -> int:
    """The line of the deepest part of ``path`` present in the file (0: unknown)."""
    for depth in range(len(path), -1, -1):
        if path[:depth] in lines:
            return lines[path[:depth]]
    return 0


def locate(display: str, line: int, path: tuple[Any, ...]) -> str:
    """``file:line: key.path``, dropping whatever part is unknown."""
    dotted = _dotted(path)
    head = f"{display}:{line}" if line else display
    return f"{head}: {dotted}" if dotted else head


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) and not isinstance(part, bool) else f".{part}"
    return out.lstrip(".")
