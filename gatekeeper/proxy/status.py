"""Gatekeeper's own read-only tool, ``gatekeeper_proposal_status``: the answer an agent gets
when it asks what became of its proposal (decision, reviewer's reason, commit outcome)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp import types

from gatekeeper.store.queries import Reader


def tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


async def proposal_status(db_path: Path, arguments: Any) -> types.CallToolResult:
    """gatekeeper_proposal_status: where a proposal stands, in words and as structured data."""
    pid = arguments.get("proposal_id") if isinstance(arguments, dict) else None
    if not isinstance(pid, str) or not pid:
        return tool_error("Pass proposal_id: the id a proposing call returned.")

    def read() -> dict[str, Any] | None:
        with Reader(db_path) as reader:
            return reader.proposal(pid)

    detail = await anyio.to_thread.run_sync(read)
    if detail is None:
        return tool_error(f"No proposal {pid!r}. Use the proposal_id from the proposing call's result.")
    decision, commit = detail["decision"] or {}, detail["commit"] or {}
    status = detail["status"]
    summary = {
        "proposal_id": pid,
        "status": status,
        "destination": detail["path"],
        "sha256": detail["sha256"],
        "size": detail["size"],
        "created_at": detail["created_at"],
        "expires_at": detail["expires_at"],
        "reviewer": decision.get("reviewer"),
        "reason": decision.get("reason"),
        "decided_at": decision.get("decided_at"),
        "outcome": commit.get("outcome"),
        "final_path": commit.get("final_path"),
        "detail": commit.get("detail") or None,
    }
    words = {
        "pending": "waiting for a person to review it",
        "expired": "expired before anyone decided; propose again if it is still wanted",
        "approved": "approved; the file will be created shortly",
        "rejected": f"rejected by {decision.get('reviewer')}: {decision.get('reason')}",
        "committed": f"committed: the file exists at {commit.get('final_path')}",
        "conflict": f"not written: {commit.get('detail') or 'something already exists at the destination'}",
        "refused": f"not written: {commit.get('detail')}",
        "failed": f"not written: {commit.get('detail')}",
    }
    text = f"Proposal {pid} for {detail['path']}: {words.get(status, status)}."
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=summary, is_error=False
    )
