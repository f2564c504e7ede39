"""Canonical encodings shared by every process: JSON for hashing, ids, and UTC times.

One definition, so that the proxy, the review page, the committer and ``audit verify``
always hash the same bytes (see shared notes, "Canonical JSON for hashing").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def canonical_json(obj: Any, *, allow_floats: bool = False) -> str:
    """Sorted keys, no whitespace, UTF-8 text.

    Floats are refused in hashed audit payloads so that hashes never drift between
    encoders; ``allow_floats`` is for recording a peer's exact argument object, where a
    float is data we must keep (Python prints the shortest round-tripping form).
    """
    if not allow_floats:
        _reject_floats(obj)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_bytes(obj: Any) -> bytes:
    return canonical_json(obj).encode("utf-8")


def _reject_floats(obj: Any) -> None:
    if isinstance(obj, float):
        raise ValueError("floats are not allowed in hashed payloads (use integers or strings)")
    if isinstance(obj, dict):
        for value in obj.values():
            _reject_floats(value)
    elif isinstance(obj, list | tuple):
        for value in obj:
            _reject_floats(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def new_id(now_ms: int | None = None) -> str:
    """A ULID: 48-bit millisecond time then 80 random bits, Crockford base32.

    Sortable by creation time and unguessable, so an id in a URL grants nothing.
    """
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_ts(ts: datetime) -> str:
    """ISO-8601 UTC with microseconds and a ``Z``: fixed width, so text order is time order."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_ts() -> str:
    return format_ts(utc_now())


def parse_ts(text: str) -> datetime:
    """Parse an ISO-8601 time; a value without a zone is taken as UTC."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"([0-9]+)([smhdw])")


def duration_seconds(text: str) -> int | None:
    """``90s``, ``30m``, ``24h``, ``7d``, ``2w`` → seconds; None if ``text`` is not a duration.

    The one grammar for durations, shared by policy.yaml and ``--since``, so a unit that works
    in one place works in the other. Seconds, not a timedelta: range checks are the caller's
    (they differ by use), and a huge value must reach them rather than overflow here.
    """
    match = _DURATION.fullmatch(text)
    return int(match[1]) * DURATION_UNITS[match[2]] if match else None


def parse_since(text: str, now: datetime | None = None) -> str:
    """``--since`` value → canonical timestamp: a duration ago (``90s``, ``1h``, ``7d``) or ISO-8601."""
    text = text.strip()
    now = now or utc_now()
    try:
        if (ago := duration_seconds(text)) is not None:
            return format_ts(now - timedelta(seconds=ago))
        return format_ts(parse_ts(text))
    except (ValueError, OverflowError):
        raise ValueError(
            f"'{text}' is neither a duration (like 30m, 1h, 7d) nor an ISO-8601 time (like 2026-11-29T10:00:00Z)"
        ) from None
