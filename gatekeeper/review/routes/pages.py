"""The pages a reviewer reads: the queue, one proposal, and its raw bytes."""

from __future__ import annotations

import json
import os

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from gatekeeper import humane
from gatekeeper.review import change, queue, render, where
from gatekeeper.review.access import ReviewerSession, State
from gatekeeper.review.proposals import approvals_view, detail, queue_approvals, status_filter
from gatekeeper.review.state import ReviewState
from gatekeeper.store.queries import STATUSES
from gatekeeper.store.reviews import Session

router = APIRouter()

MODE_WORDS = {"create": "Create", "replace": "Replace", "append": "Append to", "edit": "Edit", "delete": "Delete"}


@router.get("/")
def queue_view(
    request: Request,
    state: State,
    session: ReviewerSession,
    status: str = "pending",
    server: str = "",
    page_no: int = 1,
    approved: int = 0,
) -> HTMLResponse:
    moved = where.move_to_localhost(request, state, session)
    if moved is not None:
        return moved
    chosen = status_filter(status)
    with state.reader() as r:
        result = queue.queue_page(r, status=chosen, server=server or None, page=max(1, page_no))
        all_servers = queue.servers(r)
        approvals = queue_approvals(state, r, result.rows)
        cautions = queue.cautions(r, result.rows)
    return state.page(
        request,
        "queue.html",
        session=session,
        q=result,
        status=status,
        server=server,
        statuses=STATUSES,
        servers=all_servers,
        approvals=approvals,
        cautions=cautions,
        passkey=where.has_passkey(state, session.reviewer),
        approved=max(0, approved),
    )


@router.get("/proposals/{proposal_id}")
def proposal_view(request: Request, state: State, session: ReviewerSession, proposal_id: str) -> HTMLResponse:
    moved = where.move_to_localhost(request, state, session)
    if moved is not None:
        return moved
    return proposal_page(request, state, session, proposal_id)


def proposal_page(
    request: Request,
    state: ReviewState,
    session: Session,
    proposal_id: str,
    code: int = 200,
    approve_error: str | None = None,
) -> HTMLResponse:
    """One proposal's page; ``approve_error``: why the approval just posted was refused, shown
    beside the approve form (shown again, so the reviewer can try once more)."""
    found = detail(state, proposal_id)
    absolute = os.path.join(found["workspace"], found["path"])
    is_change = found["mode"] != "create"
    size = humane.size(len(found["content"]))
    repeat = (
        f"the resulting file ({size}): the change above shows it" if is_change else f"the content shown above ({size})"
    )
    # The disk is read only while the proposal can still be decided: that is when it matters.
    disk = change.on_disk(found) if found["status"] == "pending" else change.OnDisk("unchecked")
    return state.page(
        request,
        "proposal.html",
        code,
        session=session,
        approve_error=approve_error,
        p=found,
        absolute=absolute,
        exists_now=False if is_change else os.path.lexists(absolute),
        # A change shows its diff; the whole result is one click away (/file), not rendered here.
        content=None if is_change else render.render(found["content"]),
        change=change.view(found) if is_change else None,
        disk=disk,
        mode_words=MODE_WORDS,
        hex_bytes=change.HEX_BYTES,
        arguments=render.arguments(found["arguments"], found["content"], found["encoding"], repeat),
        events=[{**e, "payload": json.loads(e["payload"])} for e in found["events"]],
        passkey=where.has_passkey(state, session.reviewer),
        passkey_only=state.rules.approve_with == "passkey",
        approvals=approvals_view(state, found),
    )


@router.get("/proposals/{proposal_id}/file")
def proposal_file(request: Request, state: State, session: ReviewerSession, proposal_id: str) -> HTMLResponse:
    """The whole file as it would be after the change, marked like a create's content."""
    found = detail(state, proposal_id)
    content = render.render(found["content"])
    return state.page(request, "file.html", session=session, p=found, content=content, whole=True)


@router.get("/proposals/{proposal_id}/raw")
def proposal_raw(state: State, _session: ReviewerSession, proposal_id: str) -> Response:
    found = detail(state, proposal_id)
    return Response(
        found["content"],
        media_type="application/octet-stream",
        headers={"content-disposition": f'attachment; filename="{proposal_id}.bin"'},
    )
