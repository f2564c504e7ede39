"""Reverting a committed proposal: the new proposal that restores what it changed.

A revert is an ordinary proposal (it goes through review and the committer's compare-and-swap);
this module only decides its mode, base and result from the committed proposal and what is at the
destination now. No I/O here: the caller reads the file (``workspace.reading.read_at``).

    committed   outcome    revert          base            result
    create      created    delete          current bytes   (none)
    replace/append/edit
                applied    replace         current bytes   the proposal's base
    delete      deleted    create          (none)          the proposal's base

By default the file must still be exactly what the proposal left (its result, or absent after a
delete): restoring the old bytes over later changes would silently undo those too. With
``over_changes`` the revert is proposed over whatever is there now (the reviewer sees that diff,
and the bytes it replaces are kept in the store like any base).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gatekeeper.canonical import format_ts, sha256_hex, utc_now
from gatekeeper.errors import Conflict
from gatekeeper.store.store import ProposalDraft
from gatekeeper.store.values import DONE_OUTCOMES
from gatekeeper.workspace.reading import Found

if TYPE_CHECKING:
    from gatekeeper.policy import Policy
    from gatekeeper.policy.model import ToolRule

REVERT_TOOL = "gatekeeper revert"  # the proposal's tool: the review page says what it is
REVERT_CLIENT = "gatekeeper revert"  # its requester
READ_LIMIT = 64 * 1024 * 1024  # the largest file a revert reads as its base


@dataclass(frozen=True)
class RevertPlan:
    """The new proposal's mode, base (None for create) and result bytes (empty for delete)."""

    mode: str
    base: bytes | None
    content: bytes
    note: str = ""  # said to the person when the file is no longer what the proposal left


def revert_arguments(proposal_id: str) -> dict[str, Any]:
    """The recorded arguments of a revert proposal."""
    return {"revert": proposal_id}


def revert_draft(
    detail: dict[str, Any], plan: RevertPlan, *, policy_digest: str, expires_after: timedelta
) -> ProposalDraft:
    """The revert proposal: same server, workspace and path as the reverted one; its own tool,
    arguments and requester, so the review page and the audit say what it is."""
    try:
        plan.content.decode("utf-8")
        encoding = "text"
    except UnicodeDecodeError:
        encoding = "base64"
    return ProposalDraft(
        server=detail["server"],
        tool=REVERT_TOOL,
        arguments=revert_arguments(detail["id"]),
        workspace=detail["workspace"],
        path=detail["path"],
        content=plan.content,
        policy_digest=policy_digest,
        expires_at=format_ts(utc_now() + expires_after),
        encoding=encoding,
        client_name=REVERT_CLIENT,
        workspace_real=detail["workspace_real"] or detail["workspace"],
        mode=plan.mode,
        base=plan.base,
    )


def reverted_id(tool: str, arguments: Any) -> str | None:
    """The proposal a revert proposal restores, or None when it is not a revert."""
    target = arguments.get("revert") if tool == REVERT_TOOL and isinstance(arguments, dict) else None
    return target if isinstance(target, str) else None


def revert_rule(policy: Policy, server: str, path: str) -> ToolRule | None:
    """For the committer's policy check of a revert proposal, whose tool (``REVERT_TOOL``) no policy
    names: the first ``propose`` rule of its server whose globs still allow the path (a revert
    restores what such a rule let through); None when no rule does any more (then refuse)."""
    found = policy.servers.get(server)
    if found is None:
        return None
    return next((r for r in found.tools.values() if r.propose is not None and r.propose.allows(path)), None)


def plan_revert(detail: dict[str, Any], found: Found, *, over_changes: bool = False) -> RevertPlan:
    """What restores ``detail`` (``Reader.proposal``) given ``found`` at its destination now.

    Raises ``Conflict`` saying why not: not committed, the destination is not a regular file, the
    file is not what the proposal left (unless ``over_changes``), or there is nothing to restore.
    """
    pid, path = detail["id"], detail["path"]
    commit = detail.get("commit")
    outcome = commit["outcome"] if commit else None
    if outcome not in DONE_OUTCOMES:
        raise Conflict(
            f"proposal {pid} is {detail['status']}, not committed: it changed nothing, so there is nothing to revert",
            "`gatekeeper audit show " + pid + "` shows where it stands",
        )
    _check_kind(pid, path, found)
    current = found.data if found.kind == "file" else None
    if outcome == "deleted":
        base = _stored_base(detail)
        if current is None:
            return RevertPlan("create", None, base)
        if not over_changes:
            raise Conflict(
                f"{path} exists again since proposal {pid} deleted it ({found.size} bytes): restoring the deleted "
                "bytes would replace it",
                "pass --over-changes to propose replacing what is there now with the deleted bytes",
            )
        return _over(current, base, f"{path} exists again since proposal {pid} deleted it")
    expected = detail["sha256"]
    if current is None:
        if outcome == "created" or not over_changes:
            raise Conflict(
                f"{path} no longer exists: it was removed after proposal {pid} "
                + ("created it; there is nothing to revert" if outcome == "created" else "changed it"),
                None if outcome == "created" else "pass --over-changes to propose creating it with the old bytes",
            )
        return RevertPlan("create", None, _stored_base(detail), f"{path} was removed after proposal {pid}")
    changed = sha256_hex(current) != expected
    if changed and not over_changes:
        raise Conflict(
            f"{path} changed after proposal {pid} {'created' if outcome == 'created' else 'changed'} it "
            f"(now {len(current)} bytes, sha256 {sha256_hex(current)[:12]}…; the proposal left "
            f"{detail['size']} bytes, sha256 {expected[:12]}…): a revert would undo the later change too",
            "revert the later change first, or pass --over-changes to propose over what is there now",
        )
    note = f"{path} changed after proposal {pid}; the revert is proposed over what is there now" if changed else ""
    if outcome == "created":
        return RevertPlan("delete", current, b"", note)
    return _over(current, _stored_base(detail), note)


def _over(current: bytes, restore: bytes, note: str) -> RevertPlan:
    return RevertPlan("replace", current, restore, note)


def _stored_base(detail: dict[str, Any]) -> bytes:
    base = detail.get("base")
    if base is None:
        raise Conflict(f"proposal {detail['id']} recorded no base bytes; there is nothing to restore")
    return bytes(base)


def _check_kind(pid: str, path: str, found: Found) -> None:
    """Only a regular file (or nothing) can be reverted over; say what is there instead."""
    if found.kind in ("file", "missing"):
        if found.too_large:
            raise Conflict(
                f"{path} is now {found.size:,} bytes, over the {READ_LIMIT:,} bytes a revert reads",
                "restore it by hand: `gatekeeper audit show " + pid + " --base` prints the old bytes",
            )
        return
    what = {
        "symlink": "a symbolic link",
        "folder": "a folder",
        "other": "not a regular file (a FIFO, socket or device)",
        "blocked": f"not reachable ({found.detail or 'a folder on the way is a symbolic link or a file'})",
    }.get(found.kind, found.kind)
    raise Conflict(
        f"{path} is now {what}: a revert only restores a regular file",
        "move it out of the way, or restore by hand: `gatekeeper audit show " + pid + " --base` prints the old bytes",
    )
