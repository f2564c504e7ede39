"""Start the proxy on stdio. Stdout belongs to the protocol: everything else goes to stderr
or to ``<home>/logs/proxy.log``."""

from __future__ import annotations

import logging
import os
import sys
import warnings

import anyio

from gatekeeper.home import Home
from gatekeeper.policy import Policy


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
    warnings.simplefilter("ignore")  # SDK deprecation warnings (logging, roots) are not the user's business


def serve_stdio(policy: Policy, home: Home, *, mode: str = "auto") -> None:
    from gatekeeper.proxy.server import Proxy
    from gatekeeper.proxy.wire import filtered_stdio

    _logging(home)

    async def main() -> None:
        proxy = Proxy(policy, home, mode=mode)
        async with filtered_stdio(proxy.wire_refused, proxy.line_limit()) as (read, write):
            sys.stdout = sys.stderr  # a stray print() must never reach the wire (see shared notes)
            await proxy.server.run(read, write, proxy.initialization_options())

    anyio.run(main)
