"""The fast path's way back: a server's answers, progress and logs for raw calls, to the host.

The half of ``FastPath`` (proxy/fast/path.py) that runs when a carrier (proxy/servers/carrier.py) hands over a
message: the answer goes back with the host's id restored, otherwise byte for byte (or with the era's
small rewrite, ``proxy/fast/rewrite.py``); progress and logs are remapped. When the connection ends, or an
HTTP exchange goes wrong (``HttpCarrier.on_trouble``), the host gets what the regular path answers for
that failure: the same words, decided by the same code (``remote.verdict``), or the request goes
the SDK way after all where the server never ran it (a forgotten session, a redirect).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from gatekeeper.proxy.fast import rewrite
from gatekeeper.proxy.protocol.era import server_info
from gatekeeper.proxy.protocol.lines import big_number
from gatekeeper.proxy.protocol.mcp import INTERNAL_ERROR, SERVER_INFO_META_KEY, tool_error
from gatekeeper.proxy.servers.carrier import RESEND, TIMEOUT, Trouble

if TYPE_CHECKING:
    from gatekeeper.proxy.fast.router import Router
    from gatekeeper.proxy.host.stdio import HostOut
    from gatekeeper.proxy.servers.carrier import Carrier
    from gatekeeper.proxy.servers.downstream import Downstream

log = logging.getLogger("gatekeeper.proxy.fast")

ID_PREFIX = "gatekeeper-fast-"
ID_BYTES = ID_PREFIX.encode()
_CLOSED = "Connection closed"  # the SDK client's words for a child gone mid-call (proxy/servers/downstream.py)
_LOG_MARKER = b'"notifications/message"'
_ID_FIELD = re.compile(rb'("id"\s*:\s*)"' + re.escape(ID_BYTES) + rb'[0-9]+"')


@dataclass(slots=True)
class Pending:
    """One fast call the server has not answered yet."""

    host_id: str | int
    progress_token: Any  # the host's, or None
    downstream: Downstream
    carrier: Carrier
    reshape: frozenset[str] | None  # fields to drop for a 2025 host when the child speaks 2026 (else None)
    method: str
    log_levels: frozenset[str] | None = None  # a 2026 host: the levels this request opted in to (else None)
    name: str = ""  # the tool's name as the host called it (tools/call)
    line: bytes = b""  # the host's own line: sent the SDK way if the server never got it (HTTP)


class Replies:
    """The server-to-host direction of ``FastPath``, and its answers for failures."""

    proxy: Router
    out: HostOut | None
    pending: dict[str, Pending]
    by_host: dict[tuple[type, str | int], str]

    def child_line(self, line: bytes, pipe: Carrier | None = None) -> bool:
        """Take the child's line if it answers or reports on a fast call; False: the SDK client's."""
        if line.find(ID_BYTES) < 0:  # find, not ``in``: see FastPath.host_line
            return pipe is not None and line.find(_LOG_MARKER) >= 0 and self._log(line, pipe)
        message = loads(line)
        if not isinstance(message, dict):
            return False
        ours = message.get("id")
        if "method" not in message and isinstance(ours, str) and ours.startswith(ID_PREFIX):
            call = self.pending.pop(ours, None)
            if call is None:
                return True  # the answer to a call the host cancelled: nobody waits for it
            self.by_host.pop((type(call.host_id), call.host_id), None)
            self._answer(line, message, call)
            return True
        if message.get("method") == "notifications/progress":
            params = message.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            call = self.pending.get(token) if isinstance(token, str) else None
            if call is None or params is None:
                return False
            params["progressToken"] = call.progress_token
            params.pop("_meta", None)
            self._write({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
            return True
        return False

    def _log(self, line: bytes, pipe: Carrier) -> bool:
        """A child's log line while a fast call runs there, sent before that call's answer (as the SDK
        pair did): to a 2025 host always, to a 2026 host only if the request opted in at that level,
        as the regular path does. The latest call is the one attributed, as ``Proxy._on_child_log`` does."""
        calls = [c for c in self.pending.values() if c.carrier is pipe]
        if not calls or self.proxy.active.get(calls[-1].downstream.name):
            return False  # an SDK-path call in flight there (or none at all): ``Proxy._on_child_log``
        levels = calls[-1].log_levels
        if levels is None:  # a 2025 host: the level it set with logging/setLevel, if any
            levels = self.proxy.log_levels()
        level, note = rewrite.log_note(loads(line))
        if note is None:
            return False
        if levels is None or level in levels:  # else not opted in on this request: the SDK drops it too
            self._write({"jsonrpc": "2.0", "method": "notifications/message", "params": note})
        return True

    def _answer(self, line: bytes, message: dict[str, Any], call: Pending) -> None:
        result = message.get("result")
        meta = result.get("_meta") if isinstance(result, dict) else None
        stamped = isinstance(meta, dict) and SERVER_INFO_META_KEY in meta
        if call.log_levels is not None:
            self._answer_modern(line, message, call)
            return
        if call.reshape is None and not stamped:
            restored = _restore_id(line, message["id"], call.host_id)
            if restored is not None:
                self._raw(restored)
                return
        if big_number(line):
            message = json.loads(line)  # exact integers; orjson would have rounded them
            result = message.get("result")
        message["id"] = call.host_id
        if isinstance(result, dict):
            if stamped or isinstance(result.get("_meta"), dict):
                meta = {k: v for k, v in result.get("_meta", {}).items() if k != SERVER_INFO_META_KEY}
                if meta:
                    result["_meta"] = meta
                else:
                    result.pop("_meta", None)
            if call.reshape is not None:
                kind = result.get("resultType", "complete")
                structured = result.get("structuredContent")
                if kind != "complete" or (structured is not None and not isinstance(structured, dict)):
                    log.error("%s: the child's result cannot be given to a 2025 host: %s", call.method, kind)
                    self._error(call, f"Gatekeeper internal error in {call.method}; details are in its log")
                    return
                for key in call.reshape:
                    result.pop(key, None)
        self._write(message)

    def _answer_modern(self, line: bytes, message: dict[str, Any], call: Pending) -> None:
        """A 2026 host's answer: the child's serverInfo stamp replaced by ours, ``resultType`` added
        when a handshake-era child left it out (what the regular path's serialisation does)."""
        if big_number(line):
            message = json.loads(line)
        message["id"] = call.host_id
        result = message.get("result")
        if isinstance(result, dict) and not rewrite.restamp(call.method, result, server_info()):
            self._not_complete(call, result.get("resultType"))
            return
        self._write(message)

    def _not_complete(self, call: Pending, kind: Any) -> None:
        """A 2026 child asked for input (``input_required``): the SDK client toward it refuses that
        (no ``allow_input_required``), so the host gets what the regular path answers for that failure."""
        log.error("%s: the child answered with resultType %r, which Gatekeeper does not relay", call.method, kind)
        if call.method == "tools/call":
            text = f"Gatekeeper hit an internal error handling {call.name!r}; details are in its log."
            result = tool_error(text)
            self._answer_modern(b"", {"jsonrpc": "2.0", "id": call.host_id, "result": result}, call)
            return
        self._error(call, f"Gatekeeper internal error in {call.method}; details are in its log")

    def _error(self, call: Pending, message: str) -> None:
        self._write({"jsonrpc": "2.0", "id": call.host_id, "error": {"code": INTERNAL_ERROR, "message": message}})

    def child_ended(self, pipe: Carrier) -> None:
        """The child's stdout closed: every fast call still waiting on it gets today's answer."""
        waiting = [ours for ours, call in self.pending.items() if call.carrier is pipe]
        why = getattr(pipe, "why", None)
        closed = _CLOSED if why is None else f"{_CLOSED}: {why}"
        for ours in waiting:
            call = self.pending.pop(ours)
            self.by_host.pop((type(call.host_id), call.host_id), None)
            gone = f"downstream server '{call.downstream.name}' stopped during the call: {closed}"
            self._failed(call, gone, gone=True)
        if waiting:
            downstream = self.pending_downstream(pipe)
            if downstream is not None:
                downstream.mark_gone()

    def pending_downstream(self, pipe: Carrier) -> Downstream | None:
        for downstream in self.proxy.downstreams.values():
            if downstream.carrier is pipe:
                return downstream
        return None

    def _write(self, message: dict[str, Any]) -> None:
        try:
            data = orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # an integer beyond 64 bits (parsed exactly by json above)
            data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        self._raw(data)

    def _raw(self, data: bytes) -> None:
        """Whole lines to the host (each ends with its newline already: no copy to add one)."""
        if self.out is not None:
            self.out.write(data)

    def trouble(self, carrier: Carrier, ours: str, trouble: Trouble) -> None:
        """An HTTP exchange went wrong (``HttpCarrier.on_trouble``): what ``Downstream.call`` and its
        callers on the regular path make of the same error, for a call still waiting. Only a url server's
        carrier reports trouble, so proxy/servers/url/connection.py (httpx2, the SDK's HTTP client) is imported here."""
        from mcp import MCPError

        from gatekeeper.proxy.servers.url import connection as remote

        call = self.pending.pop(ours, None)
        if call is None:
            return  # the host cancelled it
        self.by_host.pop((type(call.host_id), call.host_id), None)
        downstream = call.downstream
        if trouble == TIMEOUT:
            downstream.mark_gone()
            self._failed(call, remote.timed_out(downstream.name, downstream.config.timeout))
            return
        if trouble == RESEND:
            self._resend(call)
            return
        assert isinstance(trouble, MCPError)
        kind, message, reset = remote.verdict(downstream.name, trouble)
        if reset:
            downstream.mark_gone()
        if kind == "retry":
            downstream.note(remote.renewing(downstream.name))
            self._resend(call)
        elif kind == "server":  # the server's own JSON-RPC error: the regular path passes it on
            error = trouble.error.model_dump(mode="json", by_alias=True, exclude_none=True)
            self._write({"jsonrpc": "2.0", "id": call.host_id, "error": error})
        else:
            self._failed(call, message, gone=kind == "gone")

    def _resend(self, call: Pending) -> None:
        """The host's own line, to the regular path after all (it never reached the server)."""
        out = self.out
        if out is not None and out.resubmit is not None:
            out.resubmit(call.line)

    def _failed(self, call: Pending, text: str, gone: bool = False) -> None:
        """A failed call's answer: a tool error for ``tools/call`` (as ``Proxy._forward``), else a
        protocol error (as ``Passthrough`` and completions raise it)."""
        if call.method != "tools/call":
            self._error(call, text)
            return
        if gone:
            text = f"{text}. It will be restarted on the next call."
        result = tool_error(text)
        answer = {"jsonrpc": "2.0", "id": call.host_id, "result": result}
        if call.log_levels is not None:  # a 2026 host: resultType and our stamp, as the SDK adds
            self._answer_modern(b"", answer, call)
        else:
            result.pop("resultType", None)  # not a 2025-11-25 field: the regular path leaves it out
            self._write(answer)


def _restore_id(line: bytes, ours: str, host_id: str | int) -> bytes | None:
    """The answer with the host's id in place of ours, otherwise byte for byte, and its line end;
    None if our id is not there exactly once as the ``id`` field (then the message is serialised
    again)."""
    needle = b'"' + ours.encode() + b'"'
    if line.count(needle) == 1:
        at = line.find(b'"id":' + needle)
        if at >= 0:  # the compact form every SDK writes: a splice at a known offset, one copy
            at += 5
            return b"".join((line[:at], orjson.dumps(host_id), line[at + len(needle) :], b"\n"))
    dumped = orjson.dumps(host_id)
    restored, count = _ID_FIELD.subn(lambda m: m.group(1) + dumped, line, count=2)
    return restored + b"\n" if count == 1 else None


def loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
