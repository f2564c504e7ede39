"""How large and how deep a line may be, on either side: the bounds every reader of lines shares."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Final

MAX_DEPTH: Final = 100
"""Deepest nesting of arrays and objects in one message (the SDK's own parser stops at 201);
the host side's parser, its oracle and the fast path share it, and ``depth``."""
SCAN_BYTES: Final = 1024 * 1024
"""How much of a broken or over-long line is kept and scanned for its id and method (the host's oracle, the framer)."""
MIN_LINE_BYTES: Final = 64 * 1024 * 1024
"""Every message may be this large, whatever the policy says (the smallest line limit)."""
LINE_FACTOR: Final = 8
"""A proposal's content grows up to 6 times when escaped as JSON: the cap is 8 × the largest max_bytes."""
OnRefusal = Callable[[dict[str, Any]], Awaitable[None]]
"""Told of each refused line, with its bounded audit payload (``Refusal.payload``)."""
BIG_NUMBER: Final = re.compile(rb"[0-9]{19}")  # orjson silently rounds integers past 64 bits to floats; the one copy
"""19 digits in a row: maybe an integer beyond 64 bits, which orjson would round to a float."""


def depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion; stops counting past ``MAX_DEPTH``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest
