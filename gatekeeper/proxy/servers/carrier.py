"""What the fast path (proxy/fast/path.py) sends raw requests through, whatever the server is.

Two carriers: ``ChildPipe`` (proxy/servers/stdio/process.py), lines on a stdio child's pipes, and ``HttpCarrier``
(proxy/servers/url/carrier.py), one POST per request to a ``url`` server. Both hand each message of the
answer to ``tap`` (True: the fast path took it; else it goes to the SDK client) and tell ``on_end``
when their connection is gone; only the HTTP one reports per-request ``on_trouble``, with a
``Trouble``. These names live here, not with the HTTP carrier, so the fast path can know them
without loading httpx2 and the SDK's HTTP client for a policy that has no url server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from mcp import MCPError

# What ``on_trouble`` reports for one request: the error the regular path would have raised for it;
# ``RESEND`` when the server never ran it and it must go the SDK way (a redirect); ``TIMEOUT``
# when it outlived the policy's timeout.
RESEND, TIMEOUT = "resend", "timeout"
Trouble: TypeAlias = "MCPError | str"


class Carrier(Protocol):
    alive: bool
    wants_headers: bool  # HTTP: the SDK stamp's headers go with each request; a pipe needs only the envelope
    tap: Callable[[bytes], bool] | None
    on_end: Callable[[Any], None] | None
    on_trouble: Callable[..., None] | None

    def send(self, ours: str, data: bytes, headers: dict[str, str]) -> bool:
        """Start one request (``ours`` its id, ``data`` its JSON); False: not now (the regular path takes it)."""
        ...

    def cancel(self, ours: str, data: bytes, headers: dict[str, str]) -> None:
        """The host cancelled ``ours``; ``data`` is the ``notifications/cancelled`` for it."""
        ...
