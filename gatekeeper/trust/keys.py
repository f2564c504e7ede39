"""Ed25519 keys: the review side signs, everyone else only verifies.

A database writer must not be able to approve. The HMAC in ``secret.key`` cannot promise that on
a team (every committer would need the same key, and with it could sign), so decisions, reviewer
rows and chain checkpoints are signed with an Ed25519 private key that only the review side holds.

The home's ``keys/`` folder:

- ``decision-ed25519``: the current private key (32 raw bytes, 0600). Absent on a machine that
  only verifies (a committer's, an auditor's): there ``signer`` refuses, so it cannot approve.
- ``<key id>.pub``: every public key ever used here, one hex line each; ``rotate`` adds one and
  keeps the old, so old signatures still verify. A key id is the first 16 hex digits of the
  sha256 of the raw public key.
- ``hmac-until``: decisions signed with the HMAC before the first Ed25519 key was made have ids
  up to this number; only those may still verify with ``secret.key`` (``legacy_hmac_until``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from gatekeeper.errors import GatekeeperError
from gatekeeper.trust.row_marks import MARKS_NAME

KEYS_DIR = "keys"
PRIVATE_NAME = "decision-ed25519"
HMAC_UNTIL_NAME = "hmac-until"
PUBLIC_SUFFIX = ".pub"


def key_id(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:16]


def _raw_public(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


@dataclass(frozen=True)
class Signer:
    """The review side's private key: signs canonical messages, hex signatures."""

    key_id: str
    private: Ed25519PrivateKey = field(repr=False)

    def sign(self, message: bytes) -> str:
        return self.private.sign(message).hex()


@dataclass(frozen=True)
class KeyRing:
    """Every public key this machine trusts, by id: enough to verify, never to sign."""

    public: dict[str, Ed25519PublicKey]
    # Where the home keeps the newest reviewer and passkey changes it signed (``store/row_marks.py``).
    marks: Path | None = None

    def mark(self, what: str, name: str) -> int:
        """The seq of the newest change of that row signed in this home (0: none known)."""
        from gatekeeper.trust.row_marks import read_marks

        return 0 if self.marks is None else read_marks(self.marks).get(f"{what}:{name}", 0)

    def verify(self, kid: str | None, message: bytes, signature: str | None) -> bool:
        """True only for a signature by a known key over exactly ``message``."""
        key = self.public.get(kid or "")
        if key is None or signature is None:
            return False
        try:
            key.verify(bytes.fromhex(signature), message)
        except (InvalidSignature, ValueError):
            return False
        return True


class Keys:
    """The ``keys/`` folder of a home."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def private_path(self) -> Path:
        return self.folder / PRIVATE_NAME

    def has_private(self) -> bool:
        return self.private_path.is_file()

    def ensure(self, hmac_until: int) -> bool:
        """Make the first key pair unless the folder holds any key; True when made now.

        ``hmac_until``: the highest decision id signed with the HMAC so far (kept with the keys).
        """
        if self.has_private() or self.public_ids():
            return False
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_new(self.folder / HMAC_UNTIL_NAME, f"{int(hmac_until)}\n".encode())
        self._new_pair()
        return True

    def rotate(self) -> str:
        """A new private key replaces the current one; every public key stays. Returns the new id."""
        if not self.has_private():
            raise GatekeeperError(
                f"no private key at {self.private_path}: this machine only verifies",
                "rotate keys on the machine that runs the review page",
            )
        return self._new_pair()

    def _new_pair(self) -> str:
        private = Ed25519PrivateKey.generate()
        raw = _raw_public(private.public_key())
        kid = key_id(raw)
        _write_new(self.folder / f"{kid}{PUBLIC_SUFFIX}", (raw.hex() + "\n").encode())
        seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        tmp = self.folder / f".{PRIVATE_NAME}.new"
        tmp.unlink(missing_ok=True)
        _write_new(tmp, seed)
        os.replace(tmp, self.private_path)  # the old private key is gone: only its public half is kept
        return kid

    def signer(self) -> Signer:
        """The current private key; refused on a machine that holds public keys only."""
        try:
            fd = os.open(self.private_path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise GatekeeperError(
                f"no private signing key at {self.private_path}: this machine holds public keys only, so it "
                "cannot approve, change reviewers or sign checkpoints",
                "do that on the machine that runs the review page (`gatekeeper init` there makes the key)",
            ) from None
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_mode & 0o077:
                raise GatekeeperError(
                    f"{self.private_path} is readable by others", f"run `chmod 600 {self.private_path}`"
                )
            seed = f.read()
        if len(seed) != 32:
            raise GatekeeperError(f"{self.private_path} is not an Ed25519 private key (32 bytes)")
        private = Ed25519PrivateKey.from_private_bytes(seed)
        return Signer(key_id(_raw_public(private.public_key())), private)

    def public_ids(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.name.removesuffix(PUBLIC_SUFFIX) for p in self.folder.glob(f"*{PUBLIC_SUFFIX}"))

    def keyring(self) -> KeyRing:
        public: dict[str, Ed25519PublicKey] = {}
        for kid in self.public_ids():
            raw = _read_public(self.folder / f"{kid}{PUBLIC_SUFFIX}")
            if key_id(raw) != kid:
                raise GatekeeperError(f"the public key file {kid}{PUBLIC_SUFFIX} holds another key (id {key_id(raw)})")
            public[kid] = Ed25519PublicKey.from_public_bytes(raw)
        return KeyRing(public, self.folder.parent / MARKS_NAME)

    def legacy_hmac_until(self) -> int:
        """Decisions with ids up to this were HMAC-signed before Ed25519 keys existed here (0: none)."""
        try:
            return int((self.folder / HMAC_UNTIL_NAME).read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def export_public(self) -> str:
        """Every public key and the HMAC bound, as JSON for ``import_public`` on another machine."""
        keys = {kid: _read_public(self.folder / f"{kid}{PUBLIC_SUFFIX}").hex() for kid in self.public_ids()}
        return json.dumps({"ed25519": keys, "hmac_until": self.legacy_hmac_until()}, indent=2, sort_keys=True)

    def import_public(self, text: str) -> list[str]:
        """Add the public keys of an ``export_public`` text; return the ids that were new here."""
        pairs, hmac_until = parse_public(text)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        known = set(self.public_ids())
        added = [kid for kid, raw in pairs if kid not in known]
        for kid, raw in pairs:
            if kid in added:
                _write_new(self.folder / f"{kid}{PUBLIC_SUFFIX}", (raw.hex() + "\n").encode())
        if not (self.folder / HMAC_UNTIL_NAME).exists():
            _write_new(self.folder / HMAC_UNTIL_NAME, f"{hmac_until}\n".encode())
        return added


def parse_public(text: str) -> tuple[list[tuple[str, bytes]], int]:
    """An ``export_public`` text as (key id, raw public key) pairs and the HMAC bound; a clear error
    for anything else, before anything is written."""
    try:
        obj = json.loads(text)
        keys = obj["ed25519"]
        hmac_until = int(obj.get("hmac_until", 0))
        pairs = [(str(k), bytes.fromhex(v)) for k, v in keys.items()]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise GatekeeperError(
            "this is not what `gatekeeper keys export-public` prints", "copy its whole output"
        ) from None
    for kid, raw in pairs:
        if len(raw) != 32 or key_id(raw) != kid:
            raise GatekeeperError(f"the public key {kid!r} does not match its id", "export the keys again")
    if not pairs:
        raise GatekeeperError("the exported text holds no public key", "export the keys again on the review side")
    return pairs, hmac_until


def _read_public(path: Path) -> bytes:
    try:
        raw = bytes.fromhex(path.read_text().strip())
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise GatekeeperError(f"{path} is not an Ed25519 public key (64 hex digits)")
    return raw


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
