"""Reviewer and passkey rows signed by the review side's Ed25519 key, each for its latest change.

A database writer could otherwise replace a reviewer's password hash, re-enable a reviewer or add
a passkey of their own, and log in or approve as that reviewer. Every legitimate change to these
rows goes through the store with the private key and an audit event, in one transaction, and the
signature covers the seq of that event. A row is accepted only when its signature verifies for
the reviewer's (the passkey's) *latest* change event: a row written by anything else fails, and so
does an older, validly signed row put back (a password hash from before a password change, the
enabled row of a reviewer since disabled, a removed passkey), because a later event exists. An
event appended by the writer does not help either: the current row then fails too. Only deleting
the later events and recomputing every hash would, and that is what signed checkpoints catch.

Typed against ``Signer``/``KeyRing`` only: cryptography is imported by ``gatekeeper.trust.keys``, which
the store loads when it signs or verifies, never when the proxy opens it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gatekeeper.store import events as ev
from gatekeeper.trust import signing

if TYPE_CHECKING:
    from gatekeeper.store.queries import Reader
    from gatekeeper.store.tx import Tx
    from gatekeeper.trust.keys import KeyRing, Signer

REVIEWER_COLUMNS = "name, password_hash, created_at, disabled_at, key_id, signature"
PASSKEY_COLUMNS = "reviewer, credential_id, public_key, created_at, removed_at, key_id, signature"
# The events that record a change of a reviewer row (payload "reviewer") and of a passkey row ("credential_id").
REVIEWER_CHANGES = (ev.REVIEWER_ADDED, ev.REVIEWER_DISABLED, ev.REVIEWER_PASSWORD, ev.REVIEWER_ROW_SIGNED)
PASSKEY_CHANGES = (ev.PASSKEY_ADDED, ev.PASSKEY_REMOVED, ev.PASSKEY_ROW_SIGNED)

First = Callable[[str, tuple[Any, ...]], tuple[Any, ...] | None]  # Tx.first or Reader.first


def every_row(reader: Reader) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every reviewer row (by name) and every passkey row, in the columns ``reviewer_problem`` and
    ``passkey_problem`` check: what ``audit verify`` walks (``audit/rows.py``)."""
    return (
        reader.dicts(f"SELECT {REVIEWER_COLUMNS} FROM reviewer ORDER BY name"),
        reader.dicts(f"SELECT {PASSKEY_COLUMNS} FROM passkey ORDER BY id"),
    )


def next_seq(tx: Tx) -> int:
    """The seq the next event of this transaction gets (the write lock is held: nobody else appends)."""
    row = tx.first("SELECT seq FROM audit_event ORDER BY seq DESC LIMIT 1")
    return 1 if row is None else int(row[0]) + 1


def reviewer_signed(
    signer: Signer, seq: int, name: str, password_hash: str, created_at: str, disabled_at: str | None
) -> dict[str, str]:
    """The ``key_id`` and ``signature`` columns for a reviewer row changed by the event at ``seq``."""
    message = signing.reviewer_message(signer.key_id, name, password_hash, created_at, disabled_at, seq)
    return {"key_id": signer.key_id, "signature": signer.sign(message)}


def passkey_signed(
    signer: Signer,
    seq: int,
    reviewer: str,
    credential_id: str,
    public_key: bytes,
    created_at: str,
    removed_at: str | None,
) -> dict[str, str]:
    """The ``key_id`` and ``signature`` columns for a passkey row changed by the event at ``seq``."""
    message = signing.passkey_message(signer.key_id, reviewer, credential_id, public_key, created_at, removed_at, seq)
    return {"key_id": signer.key_id, "signature": signer.sign(message)}


def change_seqs(first: First, kinds: tuple[str, ...], field: str, value: str) -> Iterator[int]:
    """The seqs of the events that changed this row, newest first, one indexed query each (on the
    kind index): a row that holds needs only the first; the older ones only explain a refusal."""
    marks = ", ".join("?" * len(kinds))
    sql = (
        f"SELECT seq FROM audit_event WHERE kind IN ({marks}) AND json_extract(payload, '$.{field}') = ? "
        "AND seq < ? ORDER BY seq DESC LIMIT 1"
    )
    below = 1 << 62
    while (row := first(sql, (*kinds, value, below))) is not None:
        below = int(row[0])
        yield below


def _problem(seqs: Iterator[int], verifies: Callable[[int], bool], what: str, mark: int = 0) -> str | None:
    latest = next(seqs, None)
    if latest is None:
        return f"no audit event records the {what} row: it was written outside Gatekeeper"
    if verifies(latest):
        if latest < mark:  # the later change events were cut from the chain (``trust/row_marks.py``)
            return (
                f"the {what} row is the one signed at seq {latest}, but this home signed a later change of it at "
                f"seq {mark}: an older row was put back and the later change cut from the audit chain"
            )
        return None
    older = next((s for s in seqs if verifies(s)), None)
    if older is not None:
        return (
            f"the {what} row is the one signed at seq {older}, but it was changed since (seq {latest}): "
            "an older row was put back in the database"
        )
    return f"the {what} row is not signed by the review key for its latest change (seq {latest})"


def reviewer_problem(first: First, keyring: KeyRing, row: tuple[Any, ...] | None) -> str | None:
    """Why a row of ``SELECT {REVIEWER_COLUMNS}`` is not to be trusted; None: present, signed for its latest change."""
    if row is None:
        return "no such reviewer"
    name, password_hash, created_at, disabled_at, kid, signature = row

    def verifies(seq: int) -> bool:
        message = signing.reviewer_message(str(kid), name, password_hash, created_at, disabled_at, seq)
        return keyring.verify(kid, message, signature)

    seqs = change_seqs(first, REVIEWER_CHANGES, "reviewer", str(name))
    return _problem(seqs, verifies, "reviewer", keyring.mark("reviewer", str(name)))


def passkey_problem(first: First, keyring: KeyRing, row: tuple[Any, ...] | None) -> str | None:
    """Why a row of ``SELECT {PASSKEY_COLUMNS}`` is not to be trusted; None: present, signed for its latest change."""
    if row is None:
        return "no such passkey"
    reviewer, credential_id, public_key, created_at, removed_at, kid, signature = row
    raw = bytes(public_key)

    def verifies(seq: int) -> bool:
        message = signing.passkey_message(str(kid), reviewer, credential_id, raw, created_at, removed_at, seq)
        return keyring.verify(kid, message, signature)

    seqs = change_seqs(first, PASSKEY_CHANGES, "credential_id", str(credential_id))
    return _problem(seqs, verifies, "passkey", keyring.mark("passkey", str(credential_id)))


def reviewer_refusal(tx: Tx, keyring: KeyRing, name: str) -> str | None:
    """None when ``name``'s row holds; else why not (see ``reviewer_problem``)."""
    row = tx.first(f"SELECT {REVIEWER_COLUMNS} FROM reviewer WHERE name = ?", (name,))
    return reviewer_problem(tx.first, keyring, row)


def passkey_refusal(tx: Tx, keyring: KeyRing, credential_id: str) -> str | None:
    """None when the passkey's row holds; else why not (see ``passkey_problem``)."""
    row = tx.first(f"SELECT {PASSKEY_COLUMNS} FROM passkey WHERE credential_id = ?", (credential_id,))
    return passkey_problem(tx.first, keyring, row)


def sign_unsigned(tx: Tx, signer: Signer, actor: str = "init") -> int:
    """Sign every reviewer and passkey row that has no signature yet (rows made before migration
    0008), trusting them as they are when the first key is made, each with its own event; return
    how many were signed."""
    count = 0
    for name, password_hash, created_at, disabled_at, _, _ in tx.all(
        f"SELECT {REVIEWER_COLUMNS} FROM reviewer WHERE signature IS NULL"
    ):
        cols = reviewer_signed(signer, next_seq(tx), name, password_hash, created_at, disabled_at)
        tx.run(
            "UPDATE reviewer SET key_id = :key_id, signature = :signature WHERE name = :name", {**cols, "name": name}
        )
        tx.append_event(ev.REVIEWER_ROW_SIGNED, actor, {"reviewer": name, **cols})
        count += 1
    for reviewer, credential_id, public_key, created_at, removed_at, _, _ in tx.all(
        f"SELECT {PASSKEY_COLUMNS} FROM passkey WHERE signature IS NULL"
    ):
        cols = passkey_signed(signer, next_seq(tx), reviewer, credential_id, bytes(public_key), created_at, removed_at)
        tx.run(
            "UPDATE passkey SET key_id = :key_id, signature = :signature WHERE credential_id = :c",
            {**cols, "c": credential_id},
        )
        tx.append_event(ev.PASSKEY_ROW_SIGNED, actor, {"reviewer": reviewer, "credential_id": credential_id, **cols})
        count += 1
    return count
