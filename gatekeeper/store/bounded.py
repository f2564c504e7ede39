"""Bounded event fields: what a refusal event may keep of what a stranger sent.

A refusal is written on behalf of someone who was not let in, so every string in its payload is
attacker-sized: a 12,000-byte ``Host`` header once added 23 KB to the append-only log per request.
Each string is cut to ``LIMIT`` characters and says how long it was; nesting and list lengths are
bounded too. Secrets (a password, a name that may be a password typed in the wrong field) must
not reach this function at all: callers store a keyed tag instead (see ``review/auth.py``).
"""

from __future__ import annotations

from typing import Any

LIMIT = 200
MAX_ITEMS = 20
MAX_DEPTH = 4


def cut(text: str, limit: int = LIMIT) -> str:
    """``text`` itself when short; else its first ``limit`` characters and the original length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[cut: {len(text)} chars]"


def bounded(value: Any, depth: int = 0) -> Any:
    """A copy of a JSON-like value with every string cut and every container bounded."""
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return f"[object of {len(value)} keys not kept]"
        items = list(value.items())
        out = {cut(str(k), 64): bounded(v, depth + 1) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out["…"] = f"{len(items) - MAX_ITEMS} more keys not kept"
        return out
    if isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            return f"[list of {len(value)} items not kept]"
        kept = [bounded(v, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            kept.append(f"{len(value) - MAX_ITEMS} more items not kept")
        return kept
    if value is None or isinstance(value, bool | int):
        return value
    return cut(repr(value))
