"""Sizes and times as a person reads them: "198 KB", "3 min ago", "Fri 4 Dec 16:54".

The page and the CLI both show these; the exact value (bytes, the ISO instant) stays one
hover or one ``--json`` away, so nothing is lost by rounding here. Decimal units (kB = 1,000
bytes), as file managers and ``ls -h --si`` show them.
"""

from __future__ import annotations

from datetime import UTC, datetime

_UNITS = ("KB", "MB", "GB", "TB")


def size(n: int | None) -> str:
    """``0 bytes``, ``1 byte``, ``999 bytes``, ``1.2 KB``, ``198 KB``, ``52.4 MB``."""
    if n is None:
        return ""
    if abs(n) < 1000:
        return f"{n:,} byte{'' if abs(n) == 1 else 's'}"
    value = float(n)
    for unit in _UNITS:
        value /= 1000
        if abs(value) < 999.5 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}" if abs(value) < 10 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def size_delta(n: int) -> str:
    """A signed change in size: ``+106 bytes``, ``−1.2 KB`` (a true minus sign)."""
    return ("+" if n >= 0 else "−") + size(abs(n))


def parse(ts: str | datetime) -> datetime:
    """A stored instant (``2026-12-04T16:54:27.123456Z``) as an aware UTC datetime."""
    if isinstance(ts, datetime):
        return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    found = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def ago(ts: str | datetime, now: datetime | None = None) -> str:
    """How long ago, in the largest unit that fits: ``just now``, ``5 min ago``, ``3 h ago``,
    ``2 days ago``; an instant in the future (a clock skew, an expiry) reads ``in 4 min``."""
    seconds = ((now or datetime.now(UTC)) - parse(ts)).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    if seconds < 45:
        return "in a moment" if future else "just now"
    for limit, unit, word in ((3600, 60, "min"), (86400, 3600, "h"), (86400 * 60, 86400, "day")):
        if seconds < limit:
            count = max(1, round(seconds / unit))
            text = f"{count} {word}{'s' if word == 'day' and count != 1 else ''}"
            return f"in {text}" if future else f"{text} ago"
    return local(ts, with_year=True)


def local(ts: str | datetime, *, with_year: bool = False) -> str:
    """The instant in this machine's local time zone: ``Fri 4 Dec 16:54`` (``2026`` added on request)."""
    at = parse(ts).astimezone()
    text = f"{at:%a} {at.day} {at:%b %H:%M}"
    return f"{text} {at.year}" if with_year else text


def iso(ts: str | datetime) -> str:
    """The exact instant, as stored (UTC, ISO 8601): the tooltip under every human time."""
    return parse(ts).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
