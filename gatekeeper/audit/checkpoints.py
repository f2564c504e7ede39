"""``audit verify`` checks every signed checkpoint: its Ed25519 signature by a known key, and that
the event at the seq it names still has the hash it signed. Run after the chain itself verified,
so the stored hashes are the recomputed ones.

Checking the checkpoints that are there does not notice checkpoints that are gone: a writer who
deletes every checkpoint and recomputes the hashes leaves a chain with none to fail. Two checks
close that, both about what is *missing*:

- The verifying home remembers the newest checkpoint it verified (``checkpoint-seen``: that event's
  seq and hash, trust on first use, like ``--expect-head`` kept for you). Next time that event must
  still be in the log, with that hash.
- ``--max-unsigned AGE``: every event older than AGE must be covered by a valid checkpoint (the
  review page signs the head every 5 minutes), so a log whose checkpoints were all deleted fails
  even on a machine that never verified it before. The message names the first uncovered event.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gatekeeper.canonical import now_ts
from gatekeeper.store.events import CHECKPOINT
from gatekeeper.store.queries import Reader
from gatekeeper.store.verifying import event_at, uncovered
from gatekeeper.trust import signing

if TYPE_CHECKING:
    from gatekeeper.trust.keys import KeyRing

SEEN_NAME = "checkpoint-seen"  # in the verifying home: the newest checkpoint `audit verify` verified


@dataclass
class CheckpointReport:
    checked: int = 0
    last_seq: int | None = None  # the latest chain head a valid checkpoint covers
    last_event: int | None = None  # the seq of that checkpoint's own event
    problems: list[tuple[int, str]] = field(default_factory=list)  # (checkpoint's seq, why)
    gaps: list[str] = field(default_factory=list)  # checkpoints that are missing: a remembered one, or too old

    @property
    def ok(self) -> bool:
        return not self.problems and not self.gaps


def verify_checkpoints(reader: Reader, keyring: KeyRing) -> CheckpointReport:
    report = CheckpointReport()
    for seq, text, actual in reader.checkpoints():
        report.checked += 1
        try:
            p = json.loads(text)
            signed_seq, signed_hash, kid, signature = int(p["seq"]), str(p["hash"]), p["key_id"], p["signature"]
        except (ValueError, KeyError, TypeError):
            report.problems.append((seq, "the checkpoint's payload is not a checkpoint"))
            continue
        if kid not in keyring.public:
            report.problems.append((seq, f"the checkpoint is signed with key {kid}, which this machine does not know"))
        elif not keyring.verify(kid, signing.checkpoint_message(kid, signed_seq, signed_hash), signature):
            report.problems.append(
                (seq, "the checkpoint's signature does not verify: it was not made by the review side")
            )
        elif actual != signed_hash:
            found = "no event" if actual is None else f"hash {actual}"
            report.problems.append(
                (
                    seq,
                    f"the checkpoint signed hash {signed_hash} at seq {signed_seq}, the log has {found} there: "
                    "history before it was rewritten and the later hashes recomputed",
                )
            )
        elif signed_seq >= (report.last_seq or 0):
            report.last_seq, report.last_event = signed_seq, seq
    return report


def check_seen(reader: Reader, report: CheckpointReport, seen_path: Path) -> None:
    """The checkpoint this home verified last time must still be in the log, unchanged."""
    try:
        seen = json.loads(seen_path.read_text())
        seq, digest = int(seen["seq"]), str(seen["hash"])
    except FileNotFoundError:
        return
    except OSError as exc:
        report.gaps.append(f"cannot read {seen_path} ({exc.strerror}), the checkpoint verified here before")
        return
    except (ValueError, KeyError, TypeError):
        report.gaps.append(f"{seen_path} is not what `audit verify` writes; delete it to start trusting anew")
        return
    row = event_at(reader, seq)
    if row == (CHECKPOINT, digest):
        return
    found = "no event" if row is None else f"a {row[0]} event with hash {row[1]}"
    report.gaps.append(
        f"the signed checkpoint at seq {seq} that this machine verified on {seen.get('verified_at', '?')} is gone "
        f"(the log has {found} there): checkpoints were deleted or history rewritten and the hashes recomputed "
        f"(if this database was restored from an older backup on purpose, delete {seen_path})"
    )


def check_unsigned(reader: Reader, report: CheckpointReport, older_than: str, max_age: str) -> None:
    """Every event (but checkpoints) before ``older_than`` (a timestamp) is covered by a valid checkpoint."""
    first, count = uncovered(reader, report.last_seq or 0, older_than)
    if not count:
        return
    covered = "no valid signed checkpoint" if report.last_seq is None else f"the newest covers seq {report.last_seq}"
    report.gaps.append(
        f"{count} event(s) older than {max_age}, from seq {first} on, are covered by no signed checkpoint "
        f"({covered}): checkpoints were deleted, or the review page has not run to sign them "
        "(run `gatekeeper audit checkpoint` on the review side, or allow more with --max-unsigned)"
    )


def remember(reader: Reader, report: CheckpointReport, seen_path: Path) -> str | None:
    """After a verify that passed: keep the newest valid checkpoint for next time (0600, replaced
    atomically). Returns why it could not be kept (a read-only home), else None."""
    if report.last_event is None:
        return None
    row = event_at(reader, report.last_event)
    if row is None:
        return None
    text = json.dumps({"seq": report.last_event, "hash": row[1], "covers": report.last_seq, "verified_at": now_ts()})
    tmp = seen_path.with_name(f".{SEEN_NAME}.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, seen_path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        why = f"could not keep the newest checkpoint in {seen_path} ({exc.strerror})"
        return f"{why}: the next verify here cannot tell whether it is gone"
    return None
