"""``completion/complete`` through the real proxy (proxy/completion.py): the ``completions``
capability, routing by ref, refusals; with the official SDK client in both eras in front of the
bundled notes server, and with a raw host in front of tests/peers/raw_server.py (the fast path:
the child's bytes back but for the id, the child saw our ``gatekeeper-fast-N`` id)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from gatekeeper.home import Home
from tests.proxy_support import PY, direct, events, proxied, write_policy
from tests.test_proxy_fastpath import (
    answer_line,
    child_lines,
    direct_answer,
    envelope,
    modern_host,
    raw_host,
)
from tests.test_proxy_wire import INIT, RawProxy

pytestmark = pytest.mark.timeout(120)
MODES = ["auto", "legacy"]
PROMPT = PromptReference(name="summarize")
TEMPLATE = ResourceTemplateReference(uri="note://{name}")


def notes_workspace(tmp: Path) -> Path:
    workspace = tmp / "workspace"
    for name in ("hello.md", "help.md", "other.md"):
        (workspace / "notes").mkdir(parents=True, exist_ok=True)
        (workspace / "notes" / name).write_text(f"# {name}\n")
    return workspace


@pytest.mark.parametrize("mode", MODES)
def test_the_notes_servers_completions_come_through(tmp_path: Path, home: Home, mode: str) -> None:
    policy = write_policy(tmp_path)
    workspace = notes_workspace(tmp_path)

    async def main() -> tuple[Any, Any, Any, Any]:
        async with direct([PY, "-m", "gatekeeper.demo.notes_server", str(workspace)], mode=mode) as d:
            expected = await d.complete(PROMPT, {"name": "path", "value": "notes/hel"})
        async with proxied(policy, home.path, mode) as p:
            capability = p.server_capabilities.completions
            prompt = await p.complete(PROMPT, {"name": "path", "value": "notes/hel"}, {"other": "x"})
            template = await p.complete(TEMPLATE, {"name": "name", "value": "he"})
            return capability, expected, prompt, template

    capability, expected, prompt, template = anyio.run(main)
    assert capability is not None  # advertised: the notes server offers completions
    assert prompt.completion.values == expected.completion.values == ["notes/hello.md", "notes/help.md"]
    assert prompt.completion.total == 2
    assert template.completion.values == ["hello", "help"]


def test_refs_to_nothing_known_or_to_a_server_without_completions_are_refused(tmp_path: Path, home: Home) -> None:
    policy = write_policy(tmp_path, probe=True)  # two servers: prompts carry the server's prefix
    with policy.open("a") as f:
        f.write("  ghost:\n    command: /nonexistent/mcp-server\n    workspace: workspace\n    tools: {read: allow}\n")
    notes_workspace(tmp_path)
    errors: dict[str, MCPError] = {}

    async def main() -> list[str]:
        async with proxied(policy, home.path, "legacy") as p:
            assert p.server_capabilities.completions is not None
            ok = await p.complete(PromptReference(name="notes__summarize"), {"name": "path", "value": "notes/o"})
            for what, ref in (
                ("unprefixed", PROMPT),  # no server's prompt with several servers
                ("no_template", ResourceTemplateReference(uri="nope://{x}")),
                ("probe", PromptReference(name="probe__anything")),  # the probe server offers no completions
                ("ghost", PromptReference(name="ghost__anything")),  # that server never starts
            ):
                with pytest.raises(MCPError) as caught:
                    await p.complete(ref, {"name": "a", "value": ""})
                errors[what] = caught.value
            assert (
                await p.call_tool("notes__read_note", {"path": "notes/other.md"})
            ).is_error is False  # still serving
            return ok.completion.values

    assert anyio.run(main) == ["notes/other.md"]
    assert "no downstream server offers the prompt 'summarize'" in errors["unprefixed"].error.message
    assert "resource template 'nope://{x}'" in errors["no_template"].error.message
    assert "'probe' does not offer completions" in errors["probe"].error.message
    assert "'ghost' is not available" in errors["ghost"].error.message
    assert [errors[w].error.code for w in ("unprefixed", "no_template", "probe")] == [-32602] * 3
    refused = [json.loads(e[2]) for e in events(home.path, "request_refused")]
    assert [(r["method"], r["reason"], r["key"]) for r in refused] == [
        ("completion/complete", "unknown_ref", "summarize"),
        ("completion/complete", "unknown_ref", "nope://{x}"),
        ("completion/complete", "no_completions", "probe__anything"),
        ("completion/complete", "server_unavailable", "ghost__anything"),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_no_completions_advertised_when_no_server_offers_them(tmp_path: Path, home: Home, mode: str) -> None:
    policy = write_policy(tmp_path, notes=False, probe=True)

    async def main() -> Any:
        async with proxied(policy, home.path, mode) as p:
            capability = p.server_capabilities.completions
            with pytest.raises(MCPError, match="'probe' does not offer completions"):
                await p.complete(PromptReference(name="x"), {"name": "a", "value": ""})
            return capability

    assert anyio.run(main) is None


def completions_at(tmp: Path, name: str) -> list[dict[str, Any]]:
    return [m for m in child_lines(tmp, name) if m.get("method") == "completion/complete"]


def complete(rid: Any, ref: dict[str, Any], **params: Any) -> dict[str, Any]:
    body = {"ref": ref, "argument": {"name": "who", "value": "h"}, **params}
    return {"jsonrpc": "2.0", "id": rid, "method": "completion/complete", "params": body}


def test_a_raw_hosts_completion_goes_through_raw(tmp_path: Path, home: Home) -> None:
    request = complete(7, {"type": "ref/prompt", "name": "hello"}, context={"arguments": {"x": "é"}})
    direct_line = direct_answer(tmp_path, request)
    with raw_host(tmp_path, home, "raw") as proxy:
        proxy.send(request)
        assert answer_line(proxy, 7).rstrip(b"\n") == direct_line  # the child's bytes, the host's id
        proxy.send(complete("t", {"type": "ref/resource", "uri": "raw://{name}"}))
        assert json.loads(answer_line(proxy, "t"))["result"]["completion"]["values"] == ["héllo", "hi"]
    seen = completions_at(tmp_path, "raw")
    assert [m["id"].startswith("gatekeeper-fast-") for m in seen] == [True, True]
    assert seen[0]["params"] == request["params"]  # the argument and context.arguments passed through
    assert seen[1]["params"]["ref"] == {"type": "ref/resource", "uri": "raw://{name}"}


def test_two_servers_completion_by_prefixed_prompt_and_listed_template(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "a", "b") as proxy:
        proxy.send(complete(1, {"type": "ref/prompt", "name": "b__hello", "title": "Hi"}))
        assert "result" in json.loads(answer_line(proxy, 1))
        proxy.send({"jsonrpc": "2.0", "id": "tl", "method": "resources/templates/list"})
        answer_line(proxy, "tl")  # both list raw://{name}: the last in policy order owns it, as for resources
        proxy.send(complete(2, {"type": "ref/resource", "uri": "raw://{name}"}))
        assert "result" in json.loads(answer_line(proxy, 2))
        proxy.send(complete(3, {"type": "ref/prompt", "name": "hello"}))  # no prefix: nobody's
        assert "no downstream server offers the prompt 'hello'" in json.loads(answer_line(proxy, 3))["error"]["message"]
    at_b = completions_at(tmp_path, "b")
    assert [m["params"]["ref"] for m in at_b] == [
        {"type": "ref/prompt", "name": "hello", "title": "Hi"},  # the child's own prompt name
        {"type": "ref/resource", "uri": "raw://{name}"},
    ]
    assert all(m["id"].startswith("gatekeeper-fast-") for m in at_b) and completions_at(tmp_path, "a") == []


def test_a_raw_host_and_a_server_without_completions(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "raw", extra=', RAW_NO_COMPLETIONS: "1"') as proxy:
        proxy.send(complete(1, {"type": "ref/prompt", "name": "hello"}))
        error = json.loads(answer_line(proxy, 1))["error"]
        init = json.loads(next(line for line in proxy.lines if json.loads(line).get("id") == "init"))
    assert error["code"] == -32602 and "'raw' does not offer completions" in error["message"]
    assert "completions" not in init["result"]["capabilities"]
    assert completions_at(tmp_path, "raw") == []


def test_a_2026_hosts_completion_is_the_sdk_paths_answer(tmp_path: Path, home: Home) -> None:
    """Raw, and on the SDK path (a 20-digit number in ``_meta`` sends it there): the same JSON."""
    big = {"x": 12345678901234567890}
    ref = {"type": "ref/prompt", "name": "hello"}
    with modern_host(tmp_path, home, "raw") as (proxy, stamp):
        answers = []
        for rid, extra in (("fast", {}), ("sdk", big)):
            proxy.send(complete(rid, ref, _meta=envelope(**extra)))
            answers.append(json.loads(answer_line(proxy, rid))["result"])
    assert answers[0] == answers[1]
    assert answers[0]["resultType"] == "complete" and answers[0]["_meta"] == {
        "io.modelcontextprotocol/serverInfo": stamp
    }
    ids = [m["id"] for m in completions_at(tmp_path, "raw")]
    assert ids[0].startswith("gatekeeper-fast-") and isinstance(ids[1], int)
    assert all("_meta" not in m["params"] for m in completions_at(tmp_path, "raw"))  # no envelope to a 2025 child


def test_a_2025_host_and_a_2026_child_get_the_sdk_paths_answer(tmp_path: Path, home: Home) -> None:
    """The notes server speaks 2026-07-28, the raw host 2025-11-25: the fast path drops the later
    revision's ``resultType`` and the child's stamp as the SDK path does (a 20-digit number in
    ``_meta`` sends the second request there). ``auto``: the default would speak 2025 to the child."""
    notes_workspace(tmp_path)
    proxy = RawProxy(write_policy(tmp_path), home.path, "--downstream-mode", "auto")
    try:
        proxy.send(INIT)
        assert proxy.wait_for(1)["result"]["capabilities"]["completions"] == {}
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        proxy.wait_for("list")
        answers = []
        for rid, meta in (("fast", {}), ("sdk", {"_meta": {"x": 12345678901234567890}})):
            params = {"ref": {"type": "ref/prompt", "name": "summarize"}, "argument": {"name": "path", "value": "n"}}
            proxy.send({"jsonrpc": "2.0", "id": rid, "method": "completion/complete", "params": {**params, **meta}})
            answers.append(json.loads(answer_line(proxy, rid))["result"])
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()
    assert (
        answers[0]
        == answers[1]
        == {
            "completion": {
                "values": ["notes/hello.md", "notes/help.md", "notes/other.md"],
                "total": 3,
                "hasMore": False,
            }
        }
    )
