"""One downstream MCP server: started by the policy, supervised, restarted with backoff.

A client is entered and left in one task, so each server gets a supervisor task that owns it;
calls borrow the live client through one face (proxy/servers/face.py): our own for a stdio child
(proxy/servers/stdio/client.py), the SDK's behind an adaptor for a url server (proxy/servers/url/sdkclient.py). A child
that dies mid-call surfaces as ``DownstreamGone``; the next call starts it again (bounded backoff).
The proxy never exits because a child did. Its stderr goes to ``<home>/logs/<server>.log``.

A ``url`` server is connected to instead of started (proxy/servers/url/connection.py): the same supervision,
its calls bounded by the policy's timeout, a session the server forgot replaced once.

In ``auto`` mode (``match`` becomes it toward a 2026 host: proxy/servers/era.py) the first start probes with
``server/discover``. Servers on the 1.x SDK die on that probe, so a child that fails on it is started once more on the
2025-11-25 ``initialize`` handshake, and the era that worked is kept (``era``). Only that first probe has a deadline
(``PROBE_TIMEOUT``): a restart in a known era waits for the child. Closing ends it within ``child.STOP_BUDGET``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio

from gatekeeper.policy import Server
from gatekeeper.policy.commands import executable
from gatekeeper.proxy.protocol.framing import child_line_limit
from gatekeeper.proxy.protocol.mcp import CONNECTION_CLOSED, MODERN_PROTOCOL_VERSIONS
from gatekeeper.proxy.protocol.rpc import Json, RpcError
from gatekeeper.proxy.servers import early
from gatekeeper.proxy.servers.carrier import Carrier
from gatekeeper.proxy.servers.face import ChildClient, DownstreamGone, DownstreamUnavailable, Progress
from gatekeeper.proxy.servers.failures import describe, innermost
from gatekeeper.proxy.servers.stdio.process import ChildCommand, ChildPipe, child_environment, child_process
from gatekeeper.proxy.servers.url.addresses import AddressRefused
from gatekeeper.store import events as ev

T = TypeVar("T")
START_TIMEOUT = float(os.environ.get("GATEKEEPER_START_TIMEOUT", "30"))
# Longer than a cold start (filesystem 0.3 s, git 0.6 s); a slower server still works, on initialize.
PROBE_TIMEOUT = float(os.environ.get("GATEKEEPER_PROBE_TIMEOUT", "5"))
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 30.0

_MARK = early.MARK
Notify = Callable[["Downstream", Any], Awaitable[None]]


class Downstream:
    def __init__(
        self,
        name: str,
        config: Server,
        log_dir: Path,
        *,
        on_message: Notify,
        on_log: Notify,
        on_event: Callable[[str, dict[str, Any]], Awaitable[None]],
        mode: str = "auto",
    ) -> None:
        self.name = name
        self.config = config
        self.log_path = log_dir / f"{name}.log"
        self.mode = mode
        self._on_message, self._on_log, self._on_event = on_message, on_log, on_event
        self.client: ChildClient | None = None
        self.carrier: Carrier = ChildPipe()  # the fast path's raw access (proxy/fast/path.py), new each life
        self.error: str | None = None
        self.failures = 0
        self.next_start = 0.0
        self.generation = 0  # bumps at every successful start: callers re-list tools then
        self.start_failed = False
        self._want = anyio.Event()
        self._pending: anyio.Event | None = None  # the start attempt callers are waiting for
        self._gone = anyio.Event()
        self._closing = False
        self._stopped = anyio.Event()
        self._supervising = False
        self._scope = anyio.CancelScope()
        self.era: str | None = None  # the mode that worked in "auto": "auto" (2026) or "legacy" (2025)
        self._probe_failed = False  # the last start failed talking (not spawning): worth one legacy try
        self._first = True  # the first start adopts the child proxy/servers/early.py spawned, if any
        self._refusal: dict[str, Any] | None = None  # this life's output was refused (to record once it ends)

    # -- supervisor ------------------------------------------------------------------------

    def request_start(self) -> None:
        if self._pending is None:
            self._pending = anyio.Event()
            self._want.set()

    def _settle(self) -> None:
        if self._pending is not None:
            self._pending.set()
            self._pending = None

    async def supervise(self) -> None:
        """Run until closed: start the child when wanted, hold it until it is gone, back off on failure."""
        self._supervising = True
        self.request_start()
        try:
            while not self._closing:
                await self._want.wait()
                self._want = anyio.Event()
                if self._closing:
                    break
                delay = self.next_start - time.monotonic()
                if delay > 0:
                    await anyio.sleep(delay)
                await self._run_once()
            self._settle()
        finally:
            self._stopped.set()

    async def _run_once(self) -> None:
        self._gone = anyio.Event()
        params = None
        if not self.config.is_remote:
            params = ChildCommand(
                command=executable(self.config),
                args=list(self.config.args),
                env=dict(self.config.env),
                cwd=self.config.cwd,
            )
        self.log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.log_path, "a", encoding="utf-8", errors="replace") as errlog:
            mode = self.era or self.mode
            started = await self._session(params, errlog, mode)
            if not started and self.era is None and mode == "auto" and self._probe_failed and not self._closing:
                # Servers on the 1.x SDK fail validation on server/discover and close: start it
                # again on the 2025-11-25 handshake (the SDK client's "legacy" mode), once.
                probe_error = self.error
                errlog.write(f"{_MARK} {self.name} failed on server/discover ({probe_error}); starting it again\n")
                errlog.flush()
                started = await self._session(params, errlog, "legacy", probe_error=probe_error)
                if not started:
                    self.error = f"{self.error} (first, with the server/discover probe: {probe_error})"
        if not started:
            self.failures += 1
            self.start_failed = True
        self.next_start = time.monotonic() + min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, self.failures - 1))
        if self._refusal is not None:
            refusal, self._refusal = self._refusal, None
            self.error = "its output was refused: a line over the cap"
            await self._on_event(ev.SERVER_OUTPUT_REFUSED, refusal)
        if not self._closing:
            kind = ev.SERVER_EXITED if started else ev.SERVER_FAILED
            await self._on_event(kind, {"server": self.name, "error": self.error, "stderr": self.stderr_tail()})
        if not started:
            self._settle()  # waiters learn the failure; a start requested after a clean run waits on

    def _client(self, params: ChildCommand | None, errlog: TextIO, mode: str) -> Any:
        """Our own client for a stdio child (proxy/servers/stdio/client.py); for a url server the SDK's
        ``Client`` behind its adaptor (proxy/servers/url/sdkclient.py, which loads the SDK: only then)."""
        calls: dict[str, Any] = {"on_message": self._message, "on_log": self._log, "roots": self._roots}
        if params is not None:
            from gatekeeper.proxy.servers.stdio.client import connect_child

            return connect_child(self._child(params, errlog, mode), mode, self.name, self.carrier, **calls)
        from gatekeeper.proxy.servers.url import connection as remote
        from gatekeeper.proxy.servers.url.sdkclient import sdk_client

        errlog.write(f"{_MARK} connecting to {self.name} ({mode}): {self.config.url}\n")
        errlog.flush()
        return sdk_client(remote.connect(self.name, self.config, errlog, carrier=self.carrier), mode, **calls)

    def _child(self, params: ChildCommand, errlog: TextIO, mode: str) -> Any:
        """The child of one life: the one proxy/servers/early.py started, on the first start, or a new one."""
        adopted = None
        if self._first:  # restarts and the legacy retry spawn anew
            self._first = False
            argv = [params.command, *params.args]
            adopted = early.adopt(self.name, argv, child_environment(params), params.cwd)
        if adopted is None:  # an adopted child's start line is in the log already (proxy/servers/early.py)
            errlog.write(f"{_MARK} starting {self.name} ({mode}): {self.config.command} {' '.join(self.config.args)}\n")
            errlog.flush()
        pipe = self.carrier if isinstance(self.carrier, ChildPipe) else None
        limit = child_line_limit([r.propose.max_bytes for r in self.config.tools.values() if r.propose is not None])
        return child_process(params, errlog, pipe, adopted, limit=limit, on_refusal=self._output_refused)

    def _output_refused(self, detail: dict[str, Any]) -> None:
        """The child wrote a line over the cap (proxy/protocol/framing.py): end this life now; the refusal is
        recorded when it has ended, and the next call starts the server again."""
        self._refusal = {"server": self.name, **detail}
        self.mark_gone()

    async def _session(
        self, params: ChildCommand | None, errlog: TextIO, mode: str, probe_error: str | None = None
    ) -> bool:
        """One life of the server: connect in ``mode``, serve until it is gone. True if it started."""
        started = False
        self._probe_failed = False
        probe_timed_out = False

        async def probe_deadline(scope: anyio.CancelScope) -> None:
            """A 1.x-SDK server that failed on the probe stays silent until its next input line."""
            nonlocal probe_timed_out
            await anyio.sleep(PROBE_TIMEOUT)
            if not started:
                probe_timed_out = True
                scope.cancel()

        try:
            with anyio.CancelScope() as self._scope:
                if self._closing:
                    self._scope.cancel()
                async with anyio.create_task_group() as tg:
                    if mode == "auto" and self.era is None:  # a known era is no guess: no deadline
                        tg.start_soon(probe_deadline, self._scope)
                    self.carrier = self._carrier()
                    async with self._client(params, errlog, mode) as client:
                        started = True
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                            # A 2026 child tells only open listen streams of a change: acknowledged
                            # before anything lists its tools, or a change in between is never heard.
                            listening = anyio.Event()
                            tg.start_soon(self._listen, client, listening)
                            with anyio.move_on_after(PROBE_TIMEOUT):
                                await listening.wait()
                        await self._started(client, mode, probe_error)
                        await self._gone.wait()
                        tg.cancel_scope.cancel()
            if probe_timed_out:
                self.error = f"no answer to server/discover within {PROBE_TIMEOUT:g} s"
                self._probe_failed = True
        except Exception as exc:
            self.error = describe(exc, self.config.is_remote)
            leaf = innermost(exc)
            # A server that cannot even be spawned (or reached) gets no second try; one that died talking may.
            self._probe_failed = not started and not isinstance(leaf, OSError | AddressRefused)
            if self._probe_failed and self.config.is_remote:
                from gatekeeper.proxy.servers.url import connection as remote

                self._probe_failed = not remote.unreachable(leaf)
            if isinstance(leaf, AddressRefused):
                detail = {"server": self.name, "host": leaf.host, "address": leaf.address, "why": leaf.why}
                await self._on_event(ev.SERVER_REFUSED, detail)
        finally:
            self.client = None
        if not started and self._closing and self.error is None:
            self.error = "the proxy is shutting down"
        return started

    def _carrier(self) -> Carrier:
        if self.config.is_remote:
            from gatekeeper.proxy.servers.url import connection as remote

            return remote.carrier(self.config)
        return ChildPipe()

    async def _started(self, client: ChildClient, mode: str, probe_error: str | None) -> None:
        """The child answered the handshake: make it the live client, record it, wake the waiters."""
        self.client, self.error, self.failures, self.start_failed = client, None, 0, False
        self.generation += 1
        modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
        remembered = self.era is not None
        if self.mode == "auto":  # the era that worked, for every later start of this proxy
            self.era = "auto" if modern else "legacy"
        await self._on_event(
            ev.SERVER_STARTED,
            {
                "server": self.name,
                "protocol_version": client.protocol_version,
                "mode": mode,
                "era": "modern" if modern else "legacy",
                "era_remembered": remembered,
                "probe_error": probe_error or None,
            },
        )
        self._settle()

    async def _listen(self, client: ChildClient, listening: anyio.Event) -> None:
        """2026-07-28 children send list_changed only while a listen stream is open; ``listening``
        is set once the child acknowledged it, or refused it (then it tells of no change)."""
        try:
            async with client.listen(tools_list_changed=True):
                listening.set()
                await anyio.sleep_forever()
        except Exception:
            return
        finally:
            listening.set()

    # -- what calls use ----------------------------------------------------------------------

    async def ready(self, timeout: float = START_TIMEOUT) -> ChildClient:
        """The live client, starting the child if needed; ``DownstreamUnavailable`` says why not."""
        if self.client is not None:
            return self.client
        if self._pending is None:
            wait = self.next_start - time.monotonic()
            if self.start_failed and wait > 0:
                raise DownstreamUnavailable(self._unavailable(f"{self.error} (next attempt in {math.ceil(wait)} s)"))
            self.request_start()
        pending = self._pending
        assert pending is not None
        with anyio.move_on_after(timeout):
            await pending.wait()
        if self.client is None:
            why = self.error if pending.is_set() else f"it did not finish starting within {timeout:g} s"
            raise DownstreamUnavailable(self._unavailable(why or "it stopped"))
        return self.client

    def _unavailable(self, why: str) -> str:
        tail = self.stderr_tail()
        text = f"downstream server '{self.name}' is not available: {why}"
        if tail:
            text += f"\nlast lines of its stderr ({self.log_path}):\n{tail}"
        return text

    def mark_gone(self) -> None:
        """The connection is dead: stop lending it out at once, and let the supervisor clean up."""
        self.client = None
        self._gone.set()

    async def close(self) -> None:
        """End the child now (its transport stops it: EOF, grace, SIGTERM, SIGKILL) and stop supervising."""
        self._closing = True
        self._gone.set()
        self._want.set()
        self._scope.cancel()  # also interrupts a start still waiting on the handshake
        if not self._supervising:
            self._stopped.set()

    async def wait_closed(self) -> None:
        """Return once the supervisor has ended (so the child is gone, or was abandoned after SIGKILL)."""
        await self._stopped.wait()

    def stderr_tail(self, lines: int = 8) -> str:
        """The last lines the child wrote to stderr, for error messages and events."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 8192))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join([line for line in text.splitlines() if not line.startswith(_MARK)][-lines:])

    async def call(self, method: Callable[[ChildClient], Awaitable[T]]) -> T:
        """Run one request on the live client; a closed connection becomes ``DownstreamGone``."""
        client = await self.ready()
        try:
            if self.config.is_remote:
                from gatekeeper.proxy.servers.url import connection as remote

                return await remote.call(self, client, method)
            return await method(client)
        except RpcError as exc:
            if exc.code == CONNECTION_CLOSED and "closed" in exc.message.lower():
                self.mark_gone()
                raise DownstreamGone(
                    f"downstream server '{self.name}' stopped during the call: {exc.message}"
                ) from None
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            self.mark_gone()
            raise DownstreamGone(f"downstream server '{self.name}' closed its connection") from None

    async def request(self, method: str, params: Json | None = None, on_progress: Progress | None = None) -> Json:
        """One request to the live server as wire dicts (``call`` around ``ChildClient.request``)."""
        return await self.call(lambda client: client.request(method, params, on_progress))

    def note(self, text: str) -> None:
        """A line of our own in the server's log."""
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(f"{_MARK} {text}\n")

    # -- callbacks from the child ------------------------------------------------------------

    async def _message(self, message: Json | Exception) -> None:
        """A notification (``{"method", "params"}``), or a url server's transport problem as the SDK
        client reports it, for ``Proxy._on_child_message``."""
        await self._on_message(self, message)

    async def _log(self, params: Json) -> None:
        await self._on_log(self, params)

    async def _roots(self) -> Json:
        """A child asking for roots gets its workspace: the one folder it is about."""
        workspace = self.config.workspace
        return {"roots": [{"uri": workspace.as_uri(), "name": f"{self.name} workspace"}]}
