"""Where a proposal stands, told to the agent: Gatekeeper's own read-only tool
``gatekeeper_proposal_status``, and the final answer of a call that waited for the decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp import types

from gatekeeper.store.queries import Reader

FINAL = {"committed", "rejected", "conflict", "refused", "failed", "expired"}


def tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


async def read_proposal(db_path: Path, proposal_id: str) -> dict[str, Any] | None:
    def read() -> dict[str, Any] | None:
        with Reader(db_path) as reader:
            return reader.proposal(proposal_id)

    return await anyio.to_thread.run_sync(read)


def summary(detail: dict[str, Any]) -> dict[str, Any]:
    decision, commit = detail["decision"] or {}, detail["commit"] or {}
    return {
        "proposal_id": detail["id"],
        "status": detail["status"],
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


def words(s: dict[str, Any]) -> str:
    return {
        "pending": "waiting for a person to review it",
        "expired": "expired before anyone decided; propose again if it is still wanted",
        "approved": "approved; the file will be created shortly",
        "rejected": f"rejected by {s['reviewer']}: {s['reason']}",
        "committed": f"committed: the file exists at {s['final_path']}",
        "conflict": f"not written: {s['detail'] or 'something already exists at the destination'}",
        "refused": f"not written: {s['detail']}",
        "failed": f"not written: {s['detail']}",
    }.get(s["status"], s["status"])


async def proposal_status(db_path: Path, arguments: Any) -> types.CallToolResult:
    """gatekeeper_proposal_status: where a proposal stands, in words and as structured data."""
    pid = arguments.get("proposal_id") if isinstance(arguments, dict) else None
    if not isinstance(pid, str) or not pid:
        return tool_error("Pass proposal_id: the id a proposing call returned.")
    detail = await read_proposal(db_path, pid)
    if detail is None:
        return tool_error(f"No proposal {pid!r}. Use the proposal_id from the proposing call's result.")
    s = summary(detail)
    text = f"Proposal {pid} for {detail['path']}: {words(s)}."
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=s)


def final_result(s: dict[str, Any]) -> types.CallToolResult:
    """The answer to a proposing call once the outcome is known: success only when the file exists."""
    text = f"Proposal {s['proposal_id']} for {s['destination']}: {words(s)}."
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=s, is_error=s["status"] != "committed"
    )


async def wait_for_outcome(
    db_path: Path, proposal_id: str, seconds: float, on_tick: Any = None, *, stop_while_pending: bool = False
) -> dict[str, Any] | None:
    """Poll until the proposal reaches a final state or time runs out; None on time-out.

    ``on_tick(elapsed)`` runs about once a second (progress notifications). With
    ``stop_while_pending`` a still-undecided proposal returns at once (a retried hand-off must
    never turn into an endless wait); an approved one waits for its commit.
    """
    start = anyio.current_time()
    next_tick = 0.0
    while True:
        detail = await read_proposal(db_path, proposal_id)
        if detail is None:
            return None
        s = summary(detail)
        if s["status"] in FINAL or (stop_while_pending and s["status"] == "pending"):
            return s
        elapsed = anyio.current_time() - start
        if elapsed >= seconds:
            return None
        if on_tick is not None and elapsed >= next_tick:
            await on_tick(elapsed)
            next_tick = elapsed + 1.0
        await anyio.sleep(0.1)
