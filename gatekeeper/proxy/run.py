"""Start the proxy on stdio. Stdout belongs to the protocol: everything else goes to stderr
or to ``<home>/logs/proxy.log``.

A host closes a server by ending its stdin, waiting 2 s, then SIGTERM. Children run in their own
process group (so a host's group kill misses them), and servers on the 1.x SDK ignore stdin
EOF, so the proxy itself must end them on EOF, SIGTERM, SIGINT and SIGHUP, within those 2 s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

import anyio

from gatekeeper.home import Home
from gatekeeper.policy import Policy
from gatekeeper.proxy.servers import early

if TYPE_CHECKING:
    from gatekeeper.proxy.routing import Proxy


def _logging(home: Home) -> None:
    home.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    root = logging.getLogger("gatekeeper")
    root.setLevel(logging.INFO)
    to_file = logging.FileHandler(home.log_dir / "proxy.log", encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    root.addHandler(to_file)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(os.environ.get("GATEKEEPER_LOG_LEVEL", "WARNING").upper())
    to_stderr.setFormatter(logging.Formatter("gatekeeper: %(message)s"))
    root.addHandler(to_stderr)


def serve_stdio(policy: Policy, home: Home, *, mode: str = "match") -> None:
    """Serve one host on stdio with our own host side (proxy/session.py): no MCP SDK on this path."""
    from gatekeeper.proxy.routing import Proxy
    from gatekeeper.proxy.session import serve_host

    _logging(home)

    async def main() -> None:
        loop = type(asyncio.get_running_loop())
        logging.getLogger("gatekeeper.proxy").info("event loop: %s.%s", loop.__module__, loop.__qualname__)
        proxy = Proxy(policy, home, mode=mode)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_end_on_signal, proxy)
            await serve_host(proxy)
            tg.cancel_scope.cancel()

    anyio.run(main, backend_options=loop_options())


LOOPS = ("uvloop", "asyncio")
"""``GATEKEEPER_LOOP``: the event loop the proxy runs on, the first by default. uvloop (libuv) costs
a relay ~0.1 ms less per call than asyncio's own loop (bench/README.md, "The fast path");
``GATEKEEPER_LOOP=asyncio`` is the way back to the stdlib loop."""


def loop_options() -> dict[str, object]:
    """anyio's asyncio backend options for ``GATEKEEPER_LOOP``. An unknown name, or uvloop asked
    for and missing, falls back to the stdlib loop with a warning on stderr (the proxy must still
    start); uvloop missing when nobody asked for it is only noted in the log."""
    log = logging.getLogger("gatekeeper.proxy")
    asked = os.environ.get("GATEKEEPER_LOOP", "").strip().lower()
    name = asked or LOOPS[0]
    if name not in LOOPS:
        log.warning("GATEKEEPER_LOOP=%s is not one of %s; using asyncio", asked, ", ".join(LOOPS))
        return {}
    if name == "uvloop":
        try:
            import uvloop  # lazily: only this loop pays its import
        except ImportError as exc:
            (log.warning if asked else log.info)(
                "GATEKEEPER_LOOP=uvloop, but uvloop cannot be imported (%s); using asyncio (pip install uvloop)", exc
            )
            return {}
        return {"loop_factory": uvloop.new_event_loop}
    return {}


async def _end_on_signal(proxy: Proxy) -> None:
    """On a signal, end every child, then exit at once.

    An orderly return is not always possible here: a stdin that is not a pipe is read in a worker
    thread (proxy/host/stdio.py) that no cancellation can interrupt while the host keeps it open.
    """
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        signum = await anext(aiter(signals))
    log = logging.getLogger("gatekeeper.proxy")
    log.info("%s: ending downstream servers", signal.Signals(signum).name)
    with anyio.CancelScope(shield=True), anyio.move_on_after(1.5):
        async with anyio.create_task_group() as tg:
            # Alongside the children, not after them: counted refusals are written (a clean stop
            # loses no count) within the same 1.5 s; a counter cut short is a rolled-back transaction.
            tg.start_soon(proxy.audit.flush_all)
            for downstream in proxy.downstreams.values():
                await downstream.close()
            for downstream in proxy.downstreams.values():
                await downstream.wait_closed()
    early.discard()  # a child started early that no session has adopted yet must not outlive us
    logging.shutdown()
    os._exit(128 + signum)
