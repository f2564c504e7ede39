"""Reviewer passwords: argon2id hashes (argon2-cffi defaults). Here, not in the review package,
because the store checks the password re-entered for an approval (step-up) itself."""

from __future__ import annotations

import secrets
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()


@cache
def _dummy_hash() -> str:
    """Verifying against this costs the same as a real hash, so an unknown name is not faster to
    try. Made on first use, not at import: hashing costs ~0.1 s, which every process that imports
    the store (the proxy among them) paid at start-up."""
    return _hasher.hash(secrets.token_urlsafe(16))


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored or _dummy_hash(), password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False
