"""What ``audit proposals``, ``audit show`` and ``audit log`` print for people.

By default each fits the terminal (``output.width()``, 80 off one): short ids (``lookup.short_length``),
times as "5 min ago" and sizes as "198 KB" (``humane``), an event's payload cut to its line. ``--wide``
prints every column with whole ids, ISO instants and byte counts; ``--json`` is for scripts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from gatekeeper import humane
from gatekeeper.cli.output import Col, kv, table
from gatekeeper.store.lookup import short_length
from gatekeeper.store.queries import ProposalRow, Reader

BRIEF = 160  # longer argument texts are cut in `audit show` (whole with --wide)
_ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def when(ts: str | None, wide: bool) -> str:
    """``5 min ago`` (the exact ISO instant with ``--wide``)."""
    if ts is None:
        return ""
    return humane.iso(ts) if wide else humane.ago(ts)


def when_long(ts: str, wide: bool) -> str:
    """``Fri 4 Dec 16:54 (5 min ago)``: both, for the one proposal ``audit show`` is about."""
    return humane.iso(ts) if wide else f"{humane.local(ts)} ({humane.ago(ts)})"


def actor(name: str, wide: bool) -> str:
    """``proxy:01M91082…``: a session's 26-character id cut to its first 8 (its creation second)."""
    return name if wide else _ULID.sub(lambda m: m[0][:8] + "…", name)


def short_ids(reader: Reader, ids: Sequence[str | None], wide: bool) -> dict[str, str]:
    """Each id as it is shown: whole with ``--wide``, else its shortest unique prefix (at least 8)."""
    present = sorted({i for i in ids if i})
    if wide or not present:
        return {i: i for i in present}
    n = short_length(reader, present)
    return {i: i[:n] for i in present}


def proposals(reader: Reader, title: str, rows: list[ProposalRow], wide: bool) -> None:
    ids = short_ids(reader, [r.id for r in rows], wide)
    if wide:
        table(
            title,
            ("id", "status", "mode", "server", "tool", "path", "size", "sha256", "created_at"),
            ((r.id, r.status, r.mode, r.server, r.tool, r.path, r.size, r.sha256[:12], r.created_at) for r in rows),
            wide=True,
        )
        return
    columns = (
        Col("id", "word"),
        Col("status", "word"),
        Col("mode", "word"),
        Col("path"),
        Col("size", "word", right=True),
        Col("created", "word"),
    )
    table(
        title,
        columns,
        ((ids[r.id], r.status, r.mode, r.path, humane.size(r.size), humane.ago(r.created_at)) for r in rows),
    )


def events(reader: Reader, title: str | None, rows: Sequence[Any], wide: bool, *, with_proposal: bool = True) -> None:
    """Audit events, one line each (``--wide``: each payload whole)."""
    ids = short_ids(reader, [r[4] for r in rows], wide) if with_proposal else {}
    columns = [Col("seq", "word", right=True), Col("at", "word"), Col("kind", "word"), Col("actor", "word")]
    if with_proposal:
        columns.append(Col("proposal", "word"))
    columns.append(Col("payload", "cut"))
    table(
        title,
        columns,
        (
            (r[0], when(r[1], wide), r[2], actor(r[3], wide), *([ids.get(r[4], "")] if with_proposal else []), r[5])
            for r in rows
        ),
        wide=wide,
    )


def show(reader: Reader, detail: dict[str, Any], wide: bool) -> None:
    kv(f"proposal {detail['id']}", show_rows(detail, wide), wide=wide)
    events(
        reader,
        "events",
        [
            (e["seq"], e["at"], e["kind"], e["actor"], e["proposal_id"], json.dumps(e["payload"], ensure_ascii=False))
            for e in detail["events"]
        ],
        wide,
        with_proposal=False,
    )


def show_rows(detail: dict[str, Any], wide: bool) -> list[tuple[str, Any]]:
    """The labelled lines of ``audit show`` for one proposal."""
    decision, commit = detail["decision"], detail["commit"]
    return [
        ("status", detail["status"]),
        ("server / tool", f"{detail['server']} / {detail['tool']}"),
        ("mode", detail["mode"]),
        ("destination", detail["path"]),
        ("workspace", detail["workspace"] + _resolves_to(detail)),
        *_change_rows(detail),
        ("created", when_long(detail["created_at"], wide)),
        ("expires", when_long(detail["expires_at"], wide)),
        (
            "requester",
            f"{detail['client_name'] or '?'} {detail['client_version'] or ''} "
            f"(protocol {detail['protocol_version'] or '?'}, session {detail['session_id'] or '?'})",
        ),
        ("policy", detail["policy_digest"]),
        ("arguments", json.dumps(detail["arguments"] if wide else _brief(detail["arguments"]), ensure_ascii=False)),
        (
            "decision",
            f"{decision['verdict']} by {decision['reviewer']} at {when_long(decision['decided_at'], wide)}"
            + (f": {decision['reason']}" if decision["reason"] else "")
            if decision
            else "none",
        ),
        (
            "commit",
            f"{commit['outcome']} at {when_long(commit['at'], wide)}"
            + (f" → {commit['final_path']}" if commit["final_path"] else "")
            + (f" ({commit['detail']})" if commit["detail"] else "")
            if commit
            else "none",
        ),
    ]


def _brief(value: Any) -> Any:
    """The arguments with each long text cut to its start and its size (the content, mostly: `--content`
    prints those bytes, `--wide` and `--json` every argument whole)."""
    if isinstance(value, dict):
        return {k: _brief(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_brief(v) for v in value]
    if isinstance(value, str) and len(value) > BRIEF:
        return f"{value[: BRIEF // 2]}… ({humane.size(len(value.encode()))} in all)"
    return value


def _resolves_to(detail: dict[str, Any]) -> str:
    real = detail.get("workspace_real")
    if real is None:
        return " (real path not recorded: made before Gatekeeper recorded it)"
    return f" (resolves to {real})" if real != detail["workspace"] else ""


def _size(n: int | None, note: str) -> str:
    """``198 KB (198,123 bytes, text)``: the rounded size a person reads, then the exact count."""
    rounded = humane.size(n)
    exact = f"{n:,} bytes" if n is not None and n >= 1000 else ""  # below, humane.size is exact
    return f"{rounded} ({', '.join(x for x in (exact, note) if x)})"


def _change_rows(detail: dict[str, Any]) -> list[tuple[str, Any]]:
    """Size and digest of the result; for a change, of its base too (a delete's result is no file)."""
    size = _size(detail["size"], detail["encoding"])
    if detail["mode"] == "create":
        return [("size", size), ("sha256", detail["sha256"])]
    base = [
        ("base size", _size(detail["base_size"], "the file before; `--base` prints them")),
        ("base sha256", detail["base_sha256"]),
    ]
    if detail["mode"] == "delete":
        return base
    return [*base, ("result size", size), ("result sha256", detail["sha256"])]
