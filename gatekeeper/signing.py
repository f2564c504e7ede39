"""HMAC signatures over decisions, with the key in ``secret.key``.

The committer re-checks the signature before writing, so a decision row inserted by
anything other than the review code path (which holds the key) is refused.
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
) -> bytes:
    return canonical_bytes(
        {
            "purpose": DECISION_PURPOSE,
            "proposal_id": proposal_id,
            "verdict": verdict,
            "reviewer": reviewer,
            "reason": reason,
            "sha256": sha256,
            "path": path,
            "decided_at": decided_at,
        }
    )


def sign(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def verify(key: bytes, message: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(key, message), signature)
