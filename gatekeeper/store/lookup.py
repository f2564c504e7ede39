"""What a person types, found in the store: a proposal id by its first characters (as git takes an
abbreviated hash), and an event kind.

A proposal id is a ULID (``canonical.new_id``): 26 Crockford base32 characters, the first ten the
creation time in milliseconds. The first 8 characters name the creation time to about a second
(the first character holds 3 bits, each next one 5: 3 + 7 × 5 = 38 of the 48 time bits, leaving
2^10 ms), so proposals an agent makes seconds apart differ within 8; a burst inside one second
needs a character or two more. ``short_length`` therefore starts at 8 and grows, git-style, until
every id shown differs from its neighbours in the whole store, never only from the rows on screen.

Lookups are range scans on the primary key (``id >= prefix AND id < the next prefix``), not
``LIKE`` (which is case-folding on SQLite and collation-bound on PostgreSQL); the next prefix is
counted in the ULID alphabet, whose order (digits, then capitals) every collation agrees on.
"""

from __future__ import annotations

from gatekeeper.errors import InvalidInput, NotFound
from gatekeeper.store.events import KINDS
from gatekeeper.store.queries import Reader

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: no I, L, O, U
MIN_SHORT = 8
ID_LENGTH = 26
LISTED = 5  # candidates named when a prefix is ambiguous


def _after(prefix: str) -> str | None:
    """The smallest prefix of the same length past every id that starts with ``prefix`` (None: none)."""
    chars = list(prefix)
    for i in range(len(chars) - 1, -1, -1):
        place = ALPHABET.index(chars[i])
        if place + 1 < len(ALPHABET):
            chars[i] = ALPHABET[place + 1]
            return "".join(chars[: i + 1])
    return None


def matching(reader: Reader, prefix: str, limit: int = LISTED + 1) -> list[str]:
    """Up to ``limit`` proposal ids that start with ``prefix`` (any case), in id order."""
    wanted = prefix.strip().upper()
    if not wanted or len(wanted) > ID_LENGTH or any(c not in ALPHABET for c in wanted):
        return []
    after = _after(wanted)
    sql = "SELECT id FROM proposal WHERE id >= ?" + ("" if after is None else " AND id < ?") + " ORDER BY id LIMIT ?"
    params: tuple[object, ...] = (wanted, limit) if after is None else (wanted, after, limit)
    return [str(row["id"]) for row in reader.dicts(sql, params)]


def resolve(reader: Reader, prefix: str, listing: str = "`gatekeeper audit proposals` lists them") -> str:
    """The one proposal id ``prefix`` starts; ``NotFound`` for none, ``InvalidInput`` naming the
    candidates when several share it."""
    found = matching(reader, prefix)
    if not found:
        raise NotFound(f"no proposal {prefix}", listing)
    if len(found) > 1:
        more = ", …" if len(found) > LISTED else ""
        raise InvalidInput(
            f"ambiguous id prefix {prefix!r}: {', '.join(found[:LISTED])}{more}",
            "type more of the id (`gatekeeper audit proposals --wide` shows whole ids)",
        )
    return found[0]


def short_length(reader: Reader, ids: list[str], minimum: int = MIN_SHORT) -> int:
    """The shortest length, at least ``minimum``, at which each of ``ids`` is a unique prefix among
    all proposals: one past the longest run each shares with its neighbours in id order."""
    need = minimum
    for pid in ids:
        for sql in (
            "SELECT max(id) AS id FROM proposal WHERE id < ?",
            "SELECT min(id) AS id FROM proposal WHERE id > ?",
        ):
            rows = reader.dicts(sql, (pid,))
            other = rows[0]["id"] if rows else None
            if other is not None:
                common = next((i for i, (a, b) in enumerate(zip(pid, str(other), strict=False)) if a != b), len(pid))
                need = max(need, common + 1)
    return min(need, ID_LENGTH)


def unknown_kind(reader: Reader, kind: str) -> bool:
    """True when ``kind`` is neither a registered event kind nor one the log holds (written by
    another version): filtering on it could only ever show nothing."""
    if kind in KINDS:
        return False
    return not reader.dicts("SELECT seq FROM audit_event WHERE kind = ? LIMIT 1", (kind,))
