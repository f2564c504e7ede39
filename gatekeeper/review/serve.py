"""Serve the review app with uvicorn, and say when it listens (``gatekeeper.up.ready``).

``uvicorn.run`` gives no word once its socket is bound, and a page that could not bind (its port
taken) must not pass for one that is starting: ``gatekeeper up`` prints a log-in link only after
this says the page listens, and answers.
"""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Callable
from typing import Any

import uvicorn


def serve(app: Any, on_listening: Callable[[], None], **options: Any) -> None:
    """``uvicorn.run(app, **options)``, calling ``on_listening`` once the socket is bound; exits
    non-zero (after uvicorn's own ``ERROR:`` line) when it could not start."""

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                on_listening()

    server = Server(uvicorn.Config(app, **options))
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C is a stop, not an error
        server.run()
    if not server.started:
        sys.exit(1)
