"""Reviewer and passkey rows signed by the review side's Ed25519 key.

A database writer could otherwise replace a reviewer's password hash, re-enable a reviewer or add
a passkey of their own, and log in or approve as that reviewer. Every legitimate change to these
rows goes through the store with the private key and an audit event; a row whose signature does
not verify with a known public key is refused at log-in and at approval.

Typed against ``Signer``/``KeyRing`` only: cryptography is imported by ``gatekeeper.keys``, which
the store loads when it signs or verifies, never when the proxy opens it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gatekeeper import signing

if TYPE_CHECKING:
    from gatekeeper.keys import KeyRing, Signer
    from gatekeeper.store.tx import Tx

REVIEWER_COLUMNS = "name, password_hash, created_at, disabled_at, key_id, signature"
PASSKEY_COLUMNS = "reviewer, credential_id, public_key, created_at, removed_at, key_id, signature"


def reviewer_signed(
    signer: Signer, name: str, password_hash: str, created_at: str, disabled_at: str | None
) -> dict[str, str]:
    """The ``key_id`` and ``signature`` columns for a reviewer row with these values."""
    message = signing.reviewer_message(signer.key_id, name, password_hash, created_at, disabled_at)
    return {"key_id": signer.key_id, "signature": signer.sign(message)}


def passkey_signed(
    signer: Signer, reviewer: str, credential_id: str, public_key: bytes, created_at: str, removed_at: str | None
) -> dict[str, str]:
    """The ``key_id`` and ``signature`` columns for a passkey row with these values."""
    message = signing.passkey_message(signer.key_id, reviewer, credential_id, public_key, created_at, removed_at)
    return {"key_id": signer.key_id, "signature": signer.sign(message)}


def reviewer_row_ok(keyring: KeyRing, row: tuple[Any, ...] | None) -> bool:
    """A row of ``SELECT {REVIEWER_COLUMNS}``: present and signed by a known key."""
    if row is None:
        return False
    name, password_hash, created_at, disabled_at, kid, signature = row
    message = signing.reviewer_message(str(kid), name, password_hash, created_at, disabled_at)
    return keyring.verify(kid, message, signature)


def passkey_row_ok(keyring: KeyRing, row: tuple[Any, ...] | None) -> bool:
    """A row of ``SELECT {PASSKEY_COLUMNS}``: present and signed by a known key."""
    if row is None:
        return False
    reviewer, credential_id, public_key, created_at, removed_at, kid, signature = row
    message = signing.passkey_message(str(kid), reviewer, credential_id, bytes(public_key), created_at, removed_at)
    return keyring.verify(kid, message, signature)


def reviewer_ok(tx: Tx, keyring: KeyRing, name: str) -> bool:
    return reviewer_row_ok(keyring, tx.first(f"SELECT {REVIEWER_COLUMNS} FROM reviewer WHERE name = ?", (name,)))


def passkey_ok(tx: Tx, keyring: KeyRing, credential_id: str) -> bool:
    row = tx.first(f"SELECT {PASSKEY_COLUMNS} FROM passkey WHERE credential_id = ?", (credential_id,))
    return passkey_row_ok(keyring, row)


def sign_unsigned(tx: Tx, signer: Signer) -> int:
    """Sign every reviewer and passkey row that has no signature yet (rows made before migration
    0008), trusting them as they are when the first key is made; return how many were signed."""
    count = 0
    for name, password_hash, created_at, disabled_at, _, _ in tx.all(
        f"SELECT {REVIEWER_COLUMNS} FROM reviewer WHERE signature IS NULL"
    ):
        cols = reviewer_signed(signer, name, password_hash, created_at, disabled_at)
        tx.run(
            "UPDATE reviewer SET key_id = :key_id, signature = :signature WHERE name = :name", {**cols, "name": name}
        )
        count += 1
    for reviewer, credential_id, public_key, created_at, removed_at, _, _ in tx.all(
        f"SELECT {PASSKEY_COLUMNS} FROM passkey WHERE signature IS NULL"
    ):
        cols = passkey_signed(signer, reviewer, credential_id, bytes(public_key), created_at, removed_at)
        tx.run(
            "UPDATE passkey SET key_id = :key_id, signature = :signature WHERE credential_id = :c",
            {**cols, "c": credential_id},
        )
        count += 1
    return count
