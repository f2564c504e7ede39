"""HMAC signatures over decisions, with the key in ``secret.key``.

The committer re-checks the signature before writing, so a decision row inserted by
anything other than the review code path (which holds the key) is refused.

A decision on a proposal that recorded its workspace's real path (migration 0004) also signs
that path, so the approval names the folder the reviewer was shown. Older decisions were signed
without it and their proposals have none: the key is left out of the message exactly then, so
they still verify, and a recorded path cannot be dropped or changed after the fact.

The same holds for the mode and base digest of a change (migration 0006): a decision made since
always records its mode, and then the message carries ``mode`` and ``base_sha256`` (None for a
create); decisions from before have neither.

And for the reviewer's proof (migration 0007): a decision made since carries ``method``
('passkey' or 'password'; a rejection None, as before), and a passkey approval its challenge
``nonce`` and ``assertion_sha256`` (sha256 of the stored assertion JSON). Present only when set, so
older decisions still verify; once set, nobody without the key can strip or swap them.
"""

from __future__ import annotations

import hashlib
import hmac

from gatekeeper.canonical import canonical_bytes

DECISION_PURPOSE = "gatekeeper.decision.v1"


def decision_message(
    *,
    proposal_id: str,
    verdict: str,
    reviewer: str,
    reason: str | None,
    sha256: str,
    path: str,
    decided_at: str,
    workspace_real: str | None = None,
    mode: str | None = None,
    base_sha256: str | None = None,
    method: str | None = None,
    nonce: str | None = None,
    assertion_sha256: str | None = None,
) -> bytes:
    message: dict[str, str | None] = {
        "purpose": DECISION_PURPOSE,
        "proposal_id": proposal_id,
        "verdict": verdict,
        "reviewer": reviewer,
        "reason": reason,
        "sha256": sha256,
        "path": path,
        "decided_at": decided_at,
    }
    if workspace_real is not None:
        message["workspace_real"] = workspace_real
    if mode is not None:
        message["mode"] = mode
        message["base_sha256"] = base_sha256
    elif base_sha256 is not None:
        raise ValueError("a base digest is signed only with its mode")
    if method is not None:
        message["method"] = method
    if nonce is not None or assertion_sha256 is not None:
        if method != "passkey" or nonce is None or assertion_sha256 is None:
            raise ValueError("a nonce and an assertion digest are signed together, with method 'passkey'")
        message["nonce"] = nonce
        message["assertion_sha256"] = assertion_sha256
    return canonical_bytes(message)


def sign(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def verify(key: bytes, message: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(key, message), signature)
