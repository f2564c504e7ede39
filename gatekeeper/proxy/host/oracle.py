"""The SDK's judgement of one host line: the oracle ``proxy/host/parse.py`` asks when it is unsure.

``host/parse.parse`` reads nearly every line itself (orjson and a shape check). A line it cannot
vouch for (one orjson rejects or would round, an unusual shape, deep nesting, a line over the
limit) comes here, and only then are the SDK's wire types (``mcp_types``, pydantic) imported. The
SDK's own stdio transport drops a line it cannot parse or validate without answering, and decodes
invalid UTF-8 by *replacing* bytes; this check (size, UTF-8, JSON, depth, JSON-RPC shape) instead
refuses a bad line with a JSON-RPC error the host side writes back, so stdout stays pure JSON-RPC
and a proposal never carries other bytes than the host sent.

Each refusal is reported through a callback (the proxy records an audit event) with a bounded
payload: the reason, the line's size, and the method and id when they can be recovered. The
raw content is never reported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from gatekeeper.proxy.protocol.limits import MAX_DEPTH, MIN_LINE_BYTES, SCAN_BYTES, OnRefusal, depth

__all__ = ["MIN_LINE_BYTES", "OnRefusal", "Refusal", "check", "parse", "recover"]

_FIELD_CHARS = 100  # longest method or id reported
_PARSE_REASONS = frozenset({"too_large", "invalid_utf8", "not_json", "lone_surrogate", "too_deep"})


@dataclass(frozen=True)
class Refusal:
    """One refused line: what the host is told and what the audit log keeps."""

    code: int
    message: str
    reason: str
    size: int
    request_id: str | int | None = None
    method: str | None = None

    def payload(self) -> dict[str, Any]:
        """The audit payload: bounded, and never the line's content."""
        out: dict[str, Any] = {"reason": self.reason, "size": self.size, "code": self.code}
        if self.method is not None:
            out["method"] = self.method[:_FIELD_CHARS]
        if self.request_id is not None:
            out["id"] = self.request_id if isinstance(self.request_id, int) else self.request_id[:_FIELD_CHARS]
        return out

    def response(self) -> dict[str, Any]:
        """The JSON-RPC error the host is answered with (the id is null when none was recovered)."""
        return {"jsonrpc": "2.0", "id": self.request_id, "error": {"code": self.code, "message": self.message}}


# -- checking one line ---------------------------------------------------------------------------


def check(line: bytes, *, size: int | None = None, limit: int = MIN_LINE_BYTES) -> Refusal | None:
    """``None`` if the SDK can take the line as it is, else the refusal to answer with."""
    outcome = parse(line, size=size, limit=limit)
    return outcome if isinstance(outcome, Refusal) else None


def parse(line: bytes, *, size: int | None = None, limit: int = MIN_LINE_BYTES) -> Refusal | types.JSONRPCMessage:
    """The message the SDK is handed, or the refusal to answer with.

    ``size`` is the full size when ``line`` is only the start of an over-long line.
    """
    size = len(line) if size is None else size
    if size > limit:
        rid, method = recover(line[:SCAN_BYTES].decode("utf-8", "replace"))
        return _refuse(
            "too_large",
            f"the message is {size:,} bytes, over Gatekeeper's limit of {limit:,} bytes per message; "
            "send smaller arguments",
            size,
            rid,
            method,
        )
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        rid, method = recover(line.decode("utf-8", "replace"))
        return _refuse(
            "invalid_utf8",
            f"the message is not valid UTF-8 (bad byte at offset {exc.start}); send JSON encoded as UTF-8",
            size,
            rid,
            method,
        )
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        return _invalid(text, exc, size)
    params = message.params if isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification) else None
    if params and depth(params) + 1 > MAX_DEPTH:
        return _refuse(
            "too_deep",
            f"the message is nested deeper than {MAX_DEPTH} levels; send flatter arguments",
            size,
            getattr(message, "id", None),
            getattr(message, "method", None),
        )
    if isinstance(message, types.JSONRPCNotification) and '"id"' in text:
        top = _top_level(text)
        if isinstance(top, dict) and "id" in top:  # the SDK would take it as a notification and never answer
            return _refuse(
                "bad_id",
                "the request id must be a string or an integer; send a request with a valid id",
                size,
                None,
                message.method,
            )
    return message


def _invalid(text: str, exc: ValidationError, size: int) -> Refusal:
    rid, method = recover(text)
    errors = exc.errors(include_url=False, include_input=False)
    json_error = next((e["msg"] for e in errors if e["type"] == "json_invalid"), None)
    if json_error is None:
        return _refuse(
            "not_jsonrpc",
            'the message is not a valid JSON-RPC 2.0 request (it needs "jsonrpc": "2.0", a string '
            '"method", an object "params" if any, and a string or integer "id")',
            size,
            rid,
            method,
        )
    detail = json_error.removeprefix("Invalid JSON: ")
    if "recursion limit" in detail:
        return _refuse(
            "too_deep",
            f"the message is nested deeper than {MAX_DEPTH} levels; send flatter arguments",
            size,
            rid,
            method,
        )
    if "surrogate" in detail or ("hex escape" in detail and _SURROGATE_ESCAPE.search(text)):
        detail = detail.replace("unexpected end of hex escape", "lone surrogate escape")
        return _refuse(
            "lone_surrogate",
            f"the message contains an unpaired UTF-16 surrogate escape ({detail}); strings must be valid "
            "Unicode: escape characters outside the BMP as a complete surrogate pair, or send them as UTF-8",
            size,
            rid,
            method,
        )
    return _refuse(
        "not_json", f"the message is not valid JSON ({detail}); send one JSON-RPC message per line", size, rid, method
    )


def _refuse(reason: str, why: str, size: int, rid: Any, method: Any) -> Refusal:
    """-32600 with the id when one was recovered; a line that did not parse and has none is -32700.

    An id is answered only next to a method: an id alone may belong to the host's broken reply
    to one of ours, and answering it would settle an unrelated request of the host's.
    """
    method = method if isinstance(method, str) else None
    valid_id = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    rid = rid if valid_id and method is not None else None
    parse_error = rid is None and reason in _PARSE_REASONS
    code, prefix = (types.PARSE_ERROR, "Parse error") if parse_error else (types.INVALID_REQUEST, "Invalid request")
    return Refusal(code, f"{prefix}: Gatekeeper refused the message: {why}.", reason, size, rid, method)


def _top_level(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null')


def recover(text: str) -> tuple[Any, Any]:
    """The top-level ``id`` and ``method`` of a message that failed, if they can be found.

    Python's parser takes lone surrogates and deeper nesting than the SDK's; when even it fails
    (cut off, broken, far too deep), a shallow token scan of the first MiB reads the top-level
    keys, skipping nested values without building them.
    """
    top = _top_level(text)
    if isinstance(top, dict):
        return top.get("id"), top.get("method")
    if top is not None:
        return None, None
    found: dict[str, Any] = {}
    depth, key, expect_key = 0, None, False
    for match in _TOKEN.finditer(text[:SCAN_BYTES]):
        token = match.group()
        if token in "{[":
            depth += 1
            expect_key = depth == 1 and token == "{"
            continue
        if token in "}]":
            depth -= 1
            if depth <= 0:
                break
            continue
        if depth != 1:
            continue
        if token == ",":
            expect_key = True
        elif token == ":":
            expect_key = False
        elif expect_key:
            key = _scalar(token)
        elif key in ("id", "method") and key not in found:
            found[key] = _scalar(token)
            if len(found) == 2:
                break
    return found.get("id"), found.get("method")


def _scalar(token: str) -> Any:
    try:
        return json.loads(token)
    except ValueError:
        return None
