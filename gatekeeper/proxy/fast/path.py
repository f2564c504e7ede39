"""Allowed requests forwarded as raw JSON-RPC, past the host side's dispatch and our client's.

Which: ``tools/call`` of an allowed tool, ``resources/read`` of a resource whose server is known,
``prompts/get`` (the reads ``Passthrough`` forwards), ``completion/complete`` of a known ref on a
server that offers completions (``proxy/completion.py`` routes, refuses and records the rest).

The regular path (proxy/session.py) dispatches the host's request to a handler, which sends it
through our client toward the child (proxy/servers/stdio/client.py) and hands the answer back to be shaped
and serialised again. For a call the policy simply allows, none of that changes what the host
gets, so the line is parsed once (orjson), its id is remapped to one of ours
(``gatekeeper-fast-N``: our client's ids toward a child are integers, so the two never collide),
the tool's name is rewritten to the child's, and the line goes to the child's stdin. The child's
answer goes back with the host's id restored, otherwise byte for byte. Progress for the call and
the host's cancellation are remapped the same way; log notifications reach a 2025 host through
our client (``Proxy._on_child_log``), a 2026 host from here, following the opt-in of the latest
fast call on that child.

The routing decision is the one ``Proxy._call_tool`` makes (``Proxy.fast_route``; for the reads
``Proxy.fast_resource``, ``fast_prompt`` and ``fast_completion``, as the regular path routes them): anything
that is not a plain allowed call to a healthy, listed, pinned tool takes the regular path, as does
anything this module cannot handle byte-exactly (a big integer orjson would round, an envelope
the host side would refuse, a congested pipe, a duplicate id). Where host and child speak different
protocol revisions, or the host speaks 2026-07-28, the rewrite is ``proxy/fast/rewrite.py``'s.

A ``url`` server is reached the same way through another carrier (proxy/servers/carrier.py): each raw
request is one POST (proxy/servers/url/carrier.py), written whole on a kept-alive connection of the proxy's
own (proxy/servers/url/http.py), and the messages of its answer come back through the same tap as a child's
lines, each as soon as it is read.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import orjson

from gatekeeper.proxy.fast import rewrite
from gatekeeper.proxy.fast.reply import ID_PREFIX, Pending, Replies, loads
from gatekeeper.proxy.fast.rewrite import ChildView
from gatekeeper.proxy.protocol.limits import MAX_DEPTH, depth
from gatekeeper.proxy.protocol.lines import shape
from gatekeeper.proxy.protocol.mcp import PROTOCOL_VERSION_META_KEY

if TYPE_CHECKING:
    from gatekeeper.proxy.fast.router import Router
    from gatekeeper.proxy.host.stdio import HostOut
    from gatekeeper.proxy.servers.carrier import Carrier
    from gatekeeper.proxy.servers.downstream import Downstream

__all__ = ["ID_PREFIX", "FastPath"]

Target = tuple["Downstream", dict[str, Any], ChildView]


class FastPath(Replies):
    """The table of fast calls in flight, and the host-to-server direction (the way back: ``Replies``)."""

    def __init__(self, proxy: Router) -> None:
        self.proxy = proxy
        self.out: HostOut | None = None
        self.pending: dict[str, Pending] = {}  # our id -> the call
        self.by_host: dict[tuple[type, str | int], str] = {}  # host id -> our id
        self._next = 0
        self.enabled = os.environ.get("GATEKEEPER_FAST_PATH", "1") != "0"  # 0: every call via dispatch (A/B)

    def attach(self, out: HostOut) -> None:
        self.out = out

    # -- host -> child ----------------------------------------------------------------------------

    def host_line(self, line: bytes) -> bool:
        """Take the line if it is an allowed request (or a cancellation of one); False: the SDK's."""
        out = self.out
        if out is None or out.congested or not self.enabled:
            return False
        # find, not ``in``: ``bytes in bytes`` first tries the needle as an int and raises (and
        # clears) a formatted TypeError, ~1,800 instructions each time
        if line.find(b'"notifications/cancelled"') >= 0:
            return bool(self.by_host) and self._cancel(line)
        if line.find(b'"tools/call"') >= 0 or line.find(b'"resources/read"') >= 0 or line.find(b'"prompts/get"') >= 0:
            return self._request(line)
        return line.find(b'"completion/complete"') >= 0 and self._request(line)

    def _request(self, line: bytes) -> bool:
        big, openers = shape(line)
        if big:
            return False
        message = loads(line)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return False
        method, host_id, params = message.get("method"), message.get("id"), message.get("params")
        if not _valid_id(host_id) or (type(host_id), host_id) in self.by_host or not isinstance(params, dict):
            return False
        meta = params.get("_meta")
        if "_meta" in params and not isinstance(meta, dict):
            return False
        if openers > MAX_DEPTH and depth(params) + 1 > MAX_DEPTH:
            return False  # the regular path refuses it with the usual message (each level opens a bracket)
        levels: frozenset[str] | None = None
        modern = isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
        if modern:
            levels = rewrite.envelope_levels(message, cast(dict[str, Any], meta), self.proxy.host_version())
            if levels is None:
                return False
            meta = {k: v for k, v in cast(dict[str, Any], meta).items() if not k.startswith(rewrite.HOST_META)}
        ours = f"{ID_PREFIX}{self._next}"
        token = None
        if method == "tools/call":
            target = self._tool(params, meta, ours)
            token = meta.get("progressToken") if meta else None
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
        carrier = downstream.carrier
        # An HTTP carrier needs the stamp's headers; a pipe only the envelope (computed once per client).
        headers = client.stamp(request) if carrier.wants_headers else client.envelope(request)
        if client.modern:
            rewrite.ask_for(request, levels if modern else self.proxy.log_levels(), True)
        if not isinstance(getattr(carrier.tap, "__self__", None), _Tap):  # one tap per carrier, knowing it
            carrier.tap = _Tap(self, carrier).line
            carrier.on_end, carrier.on_trouble = self.child_ended, self.trouble
        rid = cast(str | int, host_id)  # checked by _valid_id above
        name = str(params.get("name") or "") if method == "tools/call" else ""
        call = Pending(rid, token, downstream, carrier, client.foreign_in(method), method, levels, name, line)
        self.pending[ours] = call  # before the send: an HTTP answer may come back within it
        self.by_host[(type(rid), rid)] = ours
        if not carrier.send(ours, orjson.dumps(request), headers):
            del self.pending[ours], self.by_host[(type(rid), rid)]
            return False
        self._next += 1
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
        if meta:  # forwarded without the envelope (see fast_route), our progress token for the host's
            forwarded = {k: v for k, v in meta.items() if k != "progressToken"}
            if meta.get("progressToken") is not None:
                forwarded["progressToken"] = ours
            if forwarded:
                out_params["_meta"] = forwarded
        return downstream, out_params, client

    def _resource(self, params: dict[str, Any]) -> Target | None:
        """``resources/read``: only the uri goes on, as ``Passthrough.read_resource`` sends it."""
        uri = params.get("uri")
        if not isinstance(uri, str) or set(params) - {"uri", "_meta"}:
            return None
        # Forwarded as the host wrote it: the slow path does the same (SDK 2.3 types a resource
        # uri as a plain str, no URL normalisation; tests/test_proxy_fastpath_uri.py holds it so).
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
            return None  # the regular path answers invalid params
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
        ref = raw_ref(params)  # None: a shape the regular path answers
        route = None if ref is None else self.proxy.fast_completion(ref[0], ref[2])
        if ref is None or route is None:
            return None
        out_params = {k: v for k, v in params.items() if k != "_meta"}
        out_params["ref"] = {**params["ref"], ref[1]: route[1]}
        return route[0], out_params, route[2]

    def _cancel(self, line: bytes) -> bool:
        message = loads(line)
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
        headers = client.stamp(notice) if client is not None else {}
        call.carrier.cancel(ours, orjson.dumps(notice), headers)  # a late answer to it is dropped (child_line)
        return True


class _Tap:
    """``Carrier.tap`` for one carrier: the fast path's ``child_line``, told which carrier spoke."""

    def __init__(self, fast: FastPath, carrier: Carrier) -> None:
        self._fast, self._carrier = fast, carrier

    def line(self, line: bytes) -> bool:
        return self._fast.child_line(line, self._carrier)


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def raw_ref(params: dict[str, Any]) -> tuple[str, str, str] | None:
    """A raw ``completion/complete``'s ref as (type, its key field, the key), if every part of the
    params has the shape the host side's params check accepts unchanged; else None (the regular
    path answers it: ``Completions.complete``)."""
    ref, argument, context = params.get("ref"), params.get("argument"), params.get("context")
    if set(params) - {"ref", "argument", "context", "_meta"} or not _strings(argument, {"name", "value"}, exact=True):
        return None
    if context is not None and not (isinstance(context, dict) and set(context) <= {"arguments"}):
        return None
    if context is not None and not _strings(context.get("arguments", {}), None):
        return None
    kind = ref.get("type") if isinstance(ref, dict) else None
    field = {"ref/prompt": "name", "ref/resource": "uri"}.get(kind) if isinstance(kind, str) else None
    if not isinstance(ref, dict) or kind is None or field is None or not isinstance(key := ref.get(field), str):
        return None
    allowed = {"type", "name", "title"} if kind == "ref/prompt" else {"type", "uri"}
    return (kind, field, key) if _strings(ref, allowed) else None


def _strings(value: Any, keys: set[str] | None, *, exact: bool = False) -> bool:
    """A dict of strings, with only ``keys`` (all of them if ``exact``) when given."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return False
    return keys is None or (set(value) == keys if exact else set(value) <= keys)
