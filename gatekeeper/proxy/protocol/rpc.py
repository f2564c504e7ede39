"""JSON-RPC words both sides use: a message as a dict, request ids, and the one error type.

A child's error passes on to the host as it is, so the host side and the servers side raise and read
the same ``RpcError``.
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]
"""One JSON-RPC message or object on the wire, as orjson reads it."""
RequestId = str | int


class RpcError(Exception):
    """An error the host must get as it is: a handler raises it for a JSON-RPC error answer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def error(self) -> Json:
        out: Json = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def correlation_key(request_id: RequestId) -> RequestId:
    """The key an id correlates by: a string holding an integer is that integer (as the SDKs do)."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            return request_id
    return request_id


def valid_id(value: Any) -> bool:
    """A request id: a string or an integer, never a bool (True would alias 1)."""
    return isinstance(value, str | int) and not isinstance(value, bool)
