"""The MCP SDK's own server as an oracle, driven in memory with raw JSON-RPC messages.

tests/test_hostera.py holds Gatekeeper's SDK-free era rules (proxy/host/era.py) to what the SDK 2.3
``Server`` answers. A conversation runs a real ``Server`` (configured as Gatekeeper's host side
was, tests/sdk_oracle_host.py, in front of a real ``Proxy``; or a small one with fixed results)
over a pair of in-memory streams, one fresh connection each, so its era lock is decided anew by
each conversation's first request.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.caching import CacheHint
from mcp.server.lowlevel.server import lifespan as no_lifespan
from mcp.shared.message import SessionMessage

from gatekeeper import __version__
from gatekeeper.home import Home
from gatekeeper.policy.loader import load_policy
from gatekeeper.proxy import completion
from gatekeeper.proxy.routing import Proxy
from tests.helpers import LAST_RESORT
from tests.host_contract_support import ENVELOPE, POLICY
from tests.proxy_support import REPO
from tests.sdk_oracle_host import SdkOracleHost

Message = dict[str, Any]


def converse(server: Server[Any], messages: list[Message], options: Any = None) -> list[Message]:
    """Send ``messages`` on one new connection; return the answers to its requests, in order."""
    return anyio.run(conversation, server, messages, options or server.create_initialization_options())


async def conversation(server: Server[Any], messages: list[Message], options: Any) -> list[Message]:
    to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](32)
    server_out, from_server = anyio.create_memory_object_stream[SessionMessage](32)
    answers: list[Message] = []
    async with from_server, anyio.create_task_group() as tg:
        tg.start_soon(server.run, server_in, server_out, options)
        async with to_server:
            for message in messages:
                await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
                if "id" in message and "method" in message:
                    answers.append(await _answer(from_server))
    return answers


async def _answer(stream: Any) -> Message:
    with anyio.fail_after(LAST_RESORT):
        while True:
            sent: SessionMessage = await stream.receive()
            out = sent.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            if "method" not in out:  # a notification the server sent on its own: not an answer
                return out


def request(rid: Any, method: str, params: Any = None) -> Message:
    message: Message = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def modern(rid: Any, method: str, params: Message | None = None) -> Message:
    return request(rid, method, {**(params or {}), "_meta": dict(ENVELOPE)})


def hello(rid: Any = "init", version: Any = "2025-11-25") -> Message:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "oracle", "version": "0"}}
    return request(rid, "initialize", params)


INITIALIZED: Message = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def ask_gatekeepers_server(tmp: Path, home: Home, messages: list[Message]) -> tuple[list[Message], Server[Any]]:
    """``converse`` with the SDK server and options Gatekeeper's host side had (tests/sdk_oracle_host.py), with no
    child started: the SDK's no-op lifespan, and no wait for children's completions (none offers any)."""
    workspace = tmp / "workspace"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    policy_path = tmp / "policy.yaml"
    policy_path.write_text(textwrap.dedent(POLICY.format(py=sys.executable, workspace=workspace, repo=REPO)))
    policy = load_policy(policy_path, home=home.path)

    async def main() -> tuple[list[Message], Server[Any]]:
        proxy = Proxy(policy, home)
        host = SdkOracleHost(proxy)
        host.server.lifespan = no_lifespan
        wait, completion.SETTLE_LIMIT = completion.SETTLE_LIMIT, 0.0
        try:
            return await conversation(host.server, messages, host.initialization_options()), host.server
        finally:
            completion.SETTLE_LIMIT = wait
            proxy.store.close()

    return anyio.run(main)


def fixed_results_server(results: dict[str, Any]) -> Server[Any]:
    """A real SDK server whose handlers return ``results[method]`` as they are (a dict or a model),
    with the SDK's cache-hint defaults for every cacheable method, so its pipeline shapes them."""

    def handler(method: str) -> Any:
        async def answer(ctx: Any, params: Any) -> Any:
            return results[method]

        return answer

    hints = {m: CacheHint() for m in ("tools/list", "resources/list", "resources/templates/list", "prompts/list")}
    return Server(
        "gatekeeper",
        version=__version__,
        cache_hints={**hints, "resources/read": CacheHint()},  # type: ignore[dict-item]
        on_list_tools=handler("tools/list"),
        on_call_tool=handler("tools/call"),
        on_list_resources=handler("resources/list"),
        on_list_resource_templates=handler("resources/templates/list"),
        on_read_resource=handler("resources/read"),
        on_list_prompts=handler("prompts/list"),
        on_get_prompt=handler("prompts/get"),
        on_completion=handler("completion/complete"),
    )
