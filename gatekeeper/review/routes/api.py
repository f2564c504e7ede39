"""``/api/``: the same reads as the pages, as JSON for scripts (same log-in; errors as JSON)."""

from __future__ import annotations

import base64
import json

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gatekeeper.review import queue
from gatekeeper.review.access import ReviewerSession, State
from gatekeeper.review.proposals import detail, status_filter

router = APIRouter(prefix="/api")


@router.get("/proposals")
def api_list(
    state: State, _session: ReviewerSession, status: str = "", server: str = "", limit: int = 50
) -> JSONResponse:
    with state.reader() as r:
        rows = r.proposals(status=status_filter(status), server=server or None, limit=max(1, min(limit, 1000)))
    return JSONResponse({"proposals": [row.as_dict() for row in rows]})


@router.get("/proposals/{proposal_id}")
def api_detail(state: State, _session: ReviewerSession, proposal_id: str) -> JSONResponse:
    found = detail(state, proposal_id)
    raw: bytes = found.pop("content")
    found["content_base64"] = base64.b64encode(raw).decode("ascii")  # the result, for a change
    base: bytes | None = found.pop("base", None)
    found["base_base64"] = None if base is None else base64.b64encode(base).decode("ascii")
    found["arguments"] = json.loads(found["arguments"])
    for event in found["events"]:
        event["payload"] = json.loads(event["payload"])
    return JSONResponse(found)


@router.get("/count")
def api_count(state: State, _session: ReviewerSession) -> JSONResponse:
    with state.reader() as r:
        return JSONResponse({"pending": queue.pending_count(r)})
