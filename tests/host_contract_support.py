"""A raw JSON-RPC host that follows a script, for tests/test_proxy_host_contract.py.

The contract test holds the proxy's host-facing answers to what today's proxy (the SDK server inside)
writes. A case is a list of steps: send a line, or wait for something (an answer, a notification, a
file the probe server writes). Everything the proxy wrote by the last wait is the transcript, with
what varies per run (the version stamp, temporary paths) replaced by placeholders, so the rest can
be compared literally."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import gatekeeper
from tests.helpers import WaitTimeout, wait_until
from tests.proxy_support import REPO
from tests.test_proxy_wire import RawProxy

MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
STAMP_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
ENVELOPE = {VERSION_KEY: MODERN, CAPS_KEY: {}, INFO_KEY: {"name": "contract", "version": "0"}}

POLICY = """
version: 1
servers:
  notes:
    command: {py}
    args: ["-m", "gatekeeper.demo.notes_server", "{workspace}"]
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}"}}
    tools:
      read_note: allow
      create_note:
        propose:
          path: {{template: "notes/{{{{ args.title | slug }}}}.md"}}
          content: {{arg: body}}
          globs: ["notes/**/*.md"]
  probe:
    command: {py}
    args: ["-m", "tests.peers.probe_server"]
    cwd: {repo}
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}"}}
    tools:
      sleep_then_touch: allow
      grow: allow
      extra: allow
"""


@dataclass(frozen=True)
class Send:
    """Write one line to the proxy's stdin (a dict as JSON, bytes as they are)."""

    message: dict[str, Any] | bytes


@dataclass(frozen=True)
class Answer:
    """Wait until the request with this id has been answered (``times`` times: a duplicate id)."""

    id: Any
    times: int = 1


@dataclass(frozen=True)
class Notice:
    """Wait until the proxy has sent a notification with this method."""

    method: str


@dataclass(frozen=True)
class File:
    """Wait until the probe server has written this file (under the test's tmp folder)."""

    name: str


Step = Send | Answer | Notice | File


@dataclass(frozen=True)
class Case:
    """Steps for a raw host, and the transcript the proxy writes for them (in order unless ``any_order``:
    a child's notification and an answer race)."""

    steps: list[Step]
    transcript: list[dict[str, Any]]
    any_order: bool = False


def answer(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def error(rid: Any, code: int, message: str, *data: Any) -> dict[str, Any]:
    """An error answer; ``data`` is given only when the answer has a ``data`` member."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data:
        body["data"] = data[0]
    return {"jsonrpc": "2.0", "id": rid, "error": body}


def request(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def modern(rid: Any, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A 2026-07-28 request: the envelope (plus ``meta``) in ``params._meta``."""
    return request(rid, method, {**(params or {}), "_meta": {**ENVELOPE, **meta}})


def initialize(rid: Any, version: Any = "2025-11-25") -> dict[str, Any]:
    hello = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "contract", "version": "0"}}
    return request(rid, "initialize", hello)


def handshake(version: str = "2025-11-25") -> list[Step]:
    """A legacy host's opening: initialize, its answer, then ``notifications/initialized``."""
    return [Send(initialize("init", version)), Answer("init"), Send(notification("notifications/initialized"))]


@contextmanager
def raw_proxy(tmp: Path, home: Path) -> Iterator[RawProxy]:
    """The proxy in front of the bundled notes server and the probe server, driven raw."""
    workspace = tmp / "workspace"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    policy = tmp / "policy.yaml"
    policy.write_text(textwrap.dedent(POLICY.format(py=sys.executable, workspace=workspace, repo=REPO)))
    # Recorded when `auto` was the default: a 2025 host's cases hold the 2025-host-to-2026-child
    # rewrite to them (under the default, `match`, the child would speak 2025 too).
    proxy = RawProxy(policy, home, "--downstream-mode", "auto")
    try:
        yield proxy
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def play(proxy: RawProxy, tmp: Path, steps: list[Step], timeout: float = 60) -> list[Any]:
    """Run ``steps``; return the transcript: every line the proxy wrote, parsed and normalised."""
    try:
        _run(proxy, tmp, steps, timeout)
    except WaitTimeout as exc:  # say what the proxy had written by then
        raise WaitTimeout(f"{exc}; the proxy wrote: {[line[:300] for line in proxy.lines]}") from None
    return [normalised(json.loads(line), tmp) for line in list(proxy.lines)]


def _run(proxy: RawProxy, tmp: Path, steps: list[Step], timeout: float) -> None:
    for step in steps:
        if isinstance(step, Send):
            data = step.message if isinstance(step.message, bytes) else json.dumps(step.message).encode()
            proxy.send(_placed(data, tmp))
        elif isinstance(step, Answer):
            wait_until(partial(_answered, proxy, step.id, step.times), timeout, f"an answer to {step.id!r}")
        elif isinstance(step, Notice):
            wait_until(partial(_noticed, proxy, step.method), timeout, f"a {step.method} notification")
        else:
            wait_until((tmp / step.name).exists, timeout, f"the probe server to write {step.name}")


def _placed(data: bytes, tmp: Path) -> bytes:
    return data.replace(b"<tmp>", json.dumps(str(tmp))[1:-1].encode())


def _answered(proxy: RawProxy, rid: Any, times: int) -> bool:
    count = 0
    for line in list(proxy.lines):
        message = json.loads(line)
        count += "method" not in message and message.get("id") == rid and type(message.get("id")) is type(rid)
    return count >= times


def _noticed(proxy: RawProxy, method: str) -> bool:
    return any(json.loads(line).get("method") == method for line in list(proxy.lines))


def normalised(value: Any, tmp: Path) -> Any:
    """``value`` with the temporary folder as ``<tmp>`` and Gatekeeper's version as ``<version>``."""
    if isinstance(value, dict):
        out = {key: normalised(item, tmp) for key, item in value.items()}
        if out.get("name") == "gatekeeper" and out.get("version") == gatekeeper.__version__:
            out["version"] = "<version>"
        return out
    if isinstance(value, list):
        return [normalised(item, tmp) for item in value]
    if isinstance(value, str):
        return value.replace(str(tmp), "<tmp>")
    return value
