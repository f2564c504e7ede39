"""One host line to a JSON-RPC message, cheaply: orjson and a shape check, the SDK's parser only when unsure.

``proxy/host/oracle.py`` checks every host line with the SDK's pydantic models (``mcp_types``: ~1 s and
~30 MiB to import, and a full validation per line). Nearly every line a host sends is an ordinary
request, notification or response, which orjson reads in microseconds. ``parse`` takes those itself;
anything else (a line orjson rejects or would round, an unusual shape, deep nesting, a line over the
limit) goes to ``wire.parse``, imported only then, so a refused line gets exactly the SDK-checked
reason, code and message. ``tests/test_wire_oracle.py`` holds the two to the same answers over the
malformed corpus and generated lines. The host side (``proxy/session.py``) reads every line through here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import orjson

from gatekeeper.proxy.protocol.limits import BIG_NUMBER, LINE_FACTOR, MAX_DEPTH, MIN_LINE_BYTES, depth

if TYPE_CHECKING:
    from gatekeeper.proxy.host.oracle import Refusal

_BIG_DIGITS: Final = 19
_NOT_COUNTED: Final = bytes(sorted(set(range(256)) - set(b"0123456789{[")))
"""Deleted before counting: what is left is the line's digits and opening brackets."""
_REQUEST: Final = frozenset({"jsonrpc", "id", "method", "params"})
_RESULT: Final = frozenset({"jsonrpc", "id", "result"})
_ERROR: Final = frozenset({"jsonrpc", "id", "error"})
_ERROR_BODY: Final = frozenset({"code", "message", "data"})


def line_limit(max_bytes: list[int]) -> int:
    """The largest line accepted: generous, and never below what a proposal may need."""
    return max([MIN_LINE_BYTES, *(LINE_FACTOR * m for m in max_bytes)])


def parse(line: bytes, *, size: int | None = None, limit: int = MIN_LINE_BYTES) -> dict[str, Any] | Refusal:
    """The message a host line carries, or the refusal to answer it with (``wire.parse``'s contract).

    ``size`` is the full size when ``line`` is only the start of an over-long line.
    """
    if (len(line) if size is None else size) <= limit:
        message = quick(line)
        if message is not None:
            return message
    return oracle(line, size=size, limit=limit)


def quick(line: bytes) -> dict[str, Any] | None:
    """The message when orjson reads it and its shape is plainly valid; None: ask the oracle."""
    counted = line.translate(None, _NOT_COUNTED)  # one pass in C; the regex below is ~20x slower per byte
    openers = counted.count(b"{") + counted.count(b"[")
    if len(counted) - openers >= _BIG_DIGITS and BIG_NUMBER.search(line):
        return None
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(message) is not dict or message.get("jsonrpc") != "2.0" or not _plain(message):
        return None
    if openers > MAX_DEPTH and depth(message) > MAX_DEPTH:  # each level opens a bracket
        return None  # the oracle refuses it in its own words
    return message


def _plain(message: dict[str, Any]) -> bool:
    """A request, notification, result or error whose every member has its plain type."""
    keys = message.keys()
    if "method" in message:
        return (
            keys <= _REQUEST
            and type(message["method"]) is str
            and ("id" not in message or _id(message["id"]))
            and ("params" not in message or type(message["params"]) is dict)
        )
    if keys == _RESULT:
        return _id(message["id"]) and type(message["result"]) is dict
    if keys == _ERROR:
        error, rid = message["error"], message["id"]
        return (
            (rid is None or _id(rid))
            and type(error) is dict
            and error.keys() <= _ERROR_BODY
            and type(error.get("code")) is int
            and type(error.get("message")) is str
        )
    return False


def _id(value: Any) -> bool:
    """A JSON-RPC id: a string or an integer (never a bool, a float or null)."""
    return type(value) is str or type(value) is int


def oracle(line: bytes, *, size: int | None = None, limit: int = MIN_LINE_BYTES) -> dict[str, Any] | Refusal:
    """``wire.parse`` (the SDK's models; imported on the first line that needs it), as a plain dict:
    the values the SDK's parser read, so NaN, Infinity and integers beyond 64 bits stay as they are."""
    from gatekeeper.proxy.host import oracle as wire

    outcome = wire.parse(line, size=size, limit=limit)
    if isinstance(outcome, wire.Refusal):
        return outcome
    dumped: dict[str, Any] = outcome.model_dump(by_alias=True, exclude_unset=True)
    return dumped
