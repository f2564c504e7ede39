"""Allowed requests forwarded as raw JSON-RPC, past the SDK server and client.

Which: ``tools/call`` of an allowed tool, ``resources/read`` of a resource whose server is known,
``prompts/get`` (the reads ``Passthrough`` forwards), ``completion/complete`` of a known ref on a
server that offers completions (``proxy/completion.py`` routes, refuses and records the rest).

Today's path parses the host's line into pydantic models, runs the SDK server's handler, sends
the call through the SDK client (which validates the child's result against the tool's output
schema), and serialises everything again on the way back. For a call the policy simply allows,
none of that changes what the host gets, so the line is parsed once (orjson), its id is remapped
to one of ours (``gatekeeper-fast-N``: the SDK client's ids toward a child are integers, so the
two never collide), the tool's name is rewritten to the child's, and the line goes to the
child's stdin. The child's answer goes back with the host's id restored, otherwise byte for
byte. Progress for the call and the host's cancellation are remapped the same way; log
notifications reach a 2025 host through the SDK client (``Proxy._on_child_log``), a 2026 host
from here, following the opt-in of the latest fast call on that child.

The routing decision is the one ``Proxy._call_tool`` makes (``Proxy.fast_route``; for the reads
``Proxy.fast_resource``, ``fast_prompt`` and ``fast_completion``, as the SDK path routes them): anything
that is not a plain allowed call to a healthy, listed, pinned tool takes the SDK path, as does
anything this module cannot handle byte-exactly (a big integer orjson would round, an envelope
the SDK would refuse, a congested pipe, a duplicate id). Where host and child speak different
protocol revisions, or the host speaks 2026-07-28, the rewrite is ``proxy/eras.py``'s.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import orjson
from mcp import types
from mcp.types import PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY

from gatekeeper.proxy import eras, wire
from gatekeeper.proxy.child import ChildPipe
from gatekeeper.proxy.completion import raw_ref
from gatekeeper.proxy.eras import ChildView
from gatekeeper.proxy.status import tool_error

if TYPE_CHECKING:
    from gatekeeper.proxy.downstream import Downstream
    from gatekeeper.proxy.hostio import HostOut
    from gatekeeper.proxy.server import Proxy

log = logging.getLogger("gatekeeper.proxy.fast")

ID_PREFIX = "gatekeeper-fast-"
_ID_BYTES = ID_PREFIX.encode()
_CLOSED = "Connection closed"  # the SDK client's words for a child gone mid-call (proxy/downstream.py)
_BIG_NUMBER = re.compile(rb"[0-9]{19}")  # orjson rounds integers beyond 64 bits to floats: not ours to take
_MARKERS = (b'"tools/call"', b'"resources/read"', b'"prompts/get"', b'"completion/complete"')
_LOG_MARKER = b'"notifications/message"'
_ID_FIELD = re.compile(rb'("id"\s*:\s*)"' + re.escape(_ID_BYTES) + rb'[0-9]+"')


Target = tuple["Downstream", dict[str, Any], ChildView]


@dataclass
class Pending:
    """One fast call the child has not answered yet."""

    host_id: str | int
    progress_token: Any  # the host's, or None
    downstream: Downstream
    pipe: ChildPipe
    reshape: frozenset[str] | None  # fields to drop for a 2025 host when the child speaks 2026 (else None)
    method: str
    log_levels: frozenset[str] | None = None  # a 2026 host: the levels this request opted in to (else None)
    name: str = ""  # the tool's name as the host called it (tools/call)


class FastPath:
    """The table of fast calls in flight, and the two directions of their bytes."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.out: HostOut | None = None
        self.pending: dict[str, Pending] = {}  # our id -> the call
        self.by_host: dict[tuple[type, str | int], str] = {}  # host id -> our id
        self._next = 0

    def attach(self, out: HostOut) -> None:
        self.out = out

    # -- host -> child ----------------------------------------------------------------------------

    def host_line(self, line: bytes) -> bool:
        """Take the line if it is an allowed request (or a cancellation of one); False: the SDK's."""
        out = self.out
        if out is None or out.congested:
            return False
        if b'"notifications/cancelled"' in line:
            return bool(self.by_host) and self._cancel(line)
        if any(marker in line for marker in _MARKERS):
            return self._request(line)
        return False

    def _request(self, line: bytes) -> bool:
        if _BIG_NUMBER.search(line):
            return False
        message = _loads(line)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        method, host_id, params = message.get("method"), message.get("id"), message.get("params")
        if not _valid_id(host_id) or (type(host_id), host_id) in self.by_host or not isinstance(params, dict):
            return False
        meta = params.get("_meta")
        if "_meta" in params and not isinstance(meta, dict):
            return False
        if wire.depth(params) + 1 > wire.MAX_DEPTH:
            return False  # the SDK path refuses it with the usual message
        levels: frozenset[str] | None = None
        modern = isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
        if modern:
            levels = eras.envelope_levels(message, cast(dict[str, Any], meta), self.proxy.host_version())
            if levels is None:
                return False
            meta = {k: v for k, v in cast(dict[str, Any], meta).items() if not k.startswith(eras.HOST_META)}
        ours = f"{ID_PREFIX}{self._next}"
        token = None
        if method == "tools/call":
            target = self._tool(params, meta, ours)
            token = (meta or {}).get("progressToken")
        elif method == "resources/read":
            target = self._resource(params)
        elif method == "prompts/get":
            target = self._prompt(params)
        elif method == "completion/complete":
            target = self._complete(params)
        else:
            return False
        if target is None:
            return False
        downstream, out_params, client = target
        if client.host_modern != modern:
            return False  # an envelope on a 2025 connection, or none on a 2026 one: the SDK answers it
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": ours, "method": method, "params": out_params}
        client.stamp(request)
        eras.ask_for(request, levels, client.modern)
        pipe = downstream.pipe
        if not pipe.write(orjson.dumps(request) + b"\n"):
            return False
        self._next += 1
        if not isinstance(getattr(pipe.tap, "__self__", None), _PipeTap):  # one tap per pipe, knowing its pipe
            pipe.tap = _PipeTap(self, pipe).line
        pipe.on_end = self.child_ended
        rid = cast(str | int, host_id)  # checked by _valid_id above
        name = str(params.get("name") or "") if method == "tools/call" else ""
        self.pending[ours] = Pending(rid, token, downstream, pipe, client.foreign_in(method), method, levels, name)
        self.by_host[(type(rid), rid)] = ours
        return True

    def _tool(self, params: dict[str, Any], meta: dict[str, Any] | None, ours: str) -> Target | None:
        """``tools/call``: what ``Proxy._forward`` sends (the child's name; ``_meta`` without the
        host's progress token, ours in its place)."""
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or ("arguments" in params and not isinstance(arguments, dict)):
            return None
        route = self.proxy.fast_route(name, meta)
        if route is None:
            return None
        downstream, tool, client = route
        out_params: dict[str, Any] = {"name": tool}
        if arguments is not None:
            out_params["arguments"] = arguments
        forwarded = {k: v for k, v in (meta or {}).items() if k != "progressToken"}  # no envelope: see fast_route
        if (meta or {}).get("progressToken") is not None:
            forwarded["progressToken"] = ours
        if forwarded:
            out_params["_meta"] = forwarded
        return downstream, out_params, client

    def _resource(self, params: dict[str, Any]) -> Target | None:
        """``resources/read``: only the uri goes on, as ``Passthrough.read_resource`` sends it."""
        uri = params.get("uri")
        if not isinstance(uri, str) or set(params) - {"uri", "_meta"}:
            return None
        try:
            uri = str(types.ReadResourceRequestParams(uri=uri).uri)  # the SDK's own normalisation
        except ValueError:
            return None  # the SDK path answers an invalid uri
        route = self.proxy.fast_resource(uri)
        return None if route is None else (route[0], {"uri": uri}, route[1])

    def _prompt(self, params: dict[str, Any]) -> Target | None:
        """``prompts/get``: the prompt's name at its server, and its string arguments."""
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or set(params) - {"name", "arguments", "_meta"}:
            return None
        if arguments is not None and not (
            isinstance(arguments, dict) and all(isinstance(v, str) for v in arguments.values())
        ):
            return None  # the SDK path answers invalid params
        route = self.proxy.fast_prompt(name)
        if route is None:
            return None
        downstream, name_there, client = route
        out_params: dict[str, Any] = {"name": name_there}
        if arguments is not None:
            out_params["arguments"] = arguments
        return downstream, out_params, client

    def _complete(self, params: dict[str, Any]) -> Target | None:
        """``completion/complete``: the ref as its server names it; argument and context as sent."""
        ref = raw_ref(params)  # None: a shape the SDK path answers
        route = None if ref is None else self.proxy.fast_completion(ref[0], ref[2])
        if ref is None or route is None:
            return None
        out_params = {k: v for k, v in params.items() if k != "_meta"}
        out_params["ref"] = {**params["ref"], ref[1]: route[1]}
        return route[0], out_params, route[2]

    def _cancel(self, line: bytes) -> bool:
        message = _loads(line)
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled" or "id" in message:
            return False
        params = message.get("params")
        host_id = params.get("requestId") if isinstance(params, dict) else None
        if not _valid_id(host_id) or (key := (type(host_id), host_id)) not in self.by_host:
            return False
        ours = self.by_host.pop(key)
        call = self.pending.pop(ours)
        notice: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ours}}
        if isinstance(reason := params.get("reason"), str):  # type: ignore[union-attr]
            notice["params"]["reason"] = reason
        client = self.proxy.fast_client(call.downstream)
        if client is not None:
            client.stamp(notice)
        call.pipe.write(orjson.dumps(notice) + b"\n")  # a late answer to it is dropped (child_line)
        return True

    # -- child -> host ----------------------------------------------------------------------------

    def child_line(self, line: bytes, pipe: ChildPipe | None = None) -> bool:
        """Take the child's line if it answers or reports on a fast call; False: the SDK client's."""
        if _ID_BYTES not in line:
            return pipe is not None and _LOG_MARKER in line and self._log(line, pipe)
        message = _loads(line)
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

    def _log(self, line: bytes, pipe: ChildPipe) -> bool:
        """A child's log line while a fast call runs there, sent before that call's answer (as the SDK
        pair did): to a 2025 host always, to a 2026 host only if the request opted in at that level,
        as the SDK server does. The latest call is the one attributed, as ``Proxy._on_child_log`` does."""
        calls = [c for c in self.pending.values() if c.pipe is pipe]
        if not calls or self.proxy.active.get(calls[-1].downstream.name):
            return False  # an SDK-path call in flight there (or none at all): ``Proxy._on_child_log``
        levels = calls[-1].log_levels
        level, note = eras.log_note(_loads(line))
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
            host_id = orjson.dumps(call.host_id)
            restored, count = _ID_FIELD.subn(lambda m: m.group(1) + host_id, line, count=2)
            if count == 1:
                self._raw(restored)
                return
        if _BIG_NUMBER.search(line):
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
        when a handshake-era child left it out (what the SDK server's serialisation does)."""
        if _BIG_NUMBER.search(line):
            message = json.loads(line)
        message["id"] = call.host_id
        result = message.get("result")
        if isinstance(result, dict) and not eras.restamp(call.method, result, self.proxy.server.server_info_stamp):
            self._not_complete(call, result.get("resultType"))
            return
        self._write(message)

    def _not_complete(self, call: Pending, kind: Any) -> None:
        """A 2026 child asked for input (``input_required``): the SDK client toward it refuses that
        (no ``allow_input_required``), so the host gets what the SDK path answers for that failure."""
        log.error("%s: the child answered with resultType %r, which Gatekeeper does not relay", call.method, kind)
        if call.method == "tools/call":
            text = f"Gatekeeper hit an internal error handling {call.name!r}; details are in its log."
            result = tool_error(text).model_dump(mode="json", by_alias=True, exclude_none=True)
            self._answer_modern(b"", {"jsonrpc": "2.0", "id": call.host_id, "result": result}, call)
            return
        self._error(call, f"Gatekeeper internal error in {call.method}; details are in its log")

    def _error(self, call: Pending, message: str) -> None:
        self._write({"jsonrpc": "2.0", "id": call.host_id, "error": {"code": types.INTERNAL_ERROR, "message": message}})

    def child_ended(self, pipe: ChildPipe) -> None:
        """The child's stdout closed: every fast call still waiting on it gets today's answer."""
        waiting = [ours for ours, call in self.pending.items() if call.pipe is pipe]
        for ours in waiting:
            call = self.pending.pop(ours)
            self.by_host.pop((type(call.host_id), call.host_id), None)
            gone = f"downstream server '{call.downstream.name}' stopped during the call: {_CLOSED}"
            if call.method == "tools/call":  # as Proxy._forward answers DownstreamGone
                text = f"{gone}. It will be restarted on the next call."
                result = tool_error(text).model_dump(mode="json", by_alias=True, exclude_none=True)
                answer = {"jsonrpc": "2.0", "id": call.host_id, "result": result}
                if call.log_levels is not None:  # a 2026 host: resultType and our stamp, as the SDK adds
                    self._answer_modern(b"", answer, call)
                else:
                    self._write(answer)
            else:  # as Passthrough answers it: a protocol error
                self._error(call, gone)
        if waiting:
            downstream = self.pending_downstream(pipe)
            if downstream is not None:
                downstream.mark_gone()

    def pending_downstream(self, pipe: ChildPipe) -> Downstream | None:
        for downstream in self.proxy.downstreams.values():
            if downstream.pipe is pipe:
                return downstream
        return None

    def _write(self, message: dict[str, Any]) -> None:
        try:
            data = orjson.dumps(message)
        except TypeError:  # an integer beyond 64 bits (parsed exactly by json above)
            data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._raw(data + b"\n")

    def _raw(self, data: bytes) -> None:
        if self.out is not None:
            self.out.write(data if data.endswith(b"\n") else data + b"\n")


class _PipeTap:
    """``ChildPipe.tap`` for one pipe: the fast path's ``child_line``, told which child spoke."""

    def __init__(self, fast: FastPath, pipe: ChildPipe) -> None:
        self._fast, self._pipe = fast, pipe

    def line(self, line: bytes) -> bool:
        return self._fast.child_line(line, self._pipe)


def _loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
