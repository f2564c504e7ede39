"""The proxy as a real stdio subprocess, driven by the official SDK client in both eras,
in front of the real demo notes server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatekeeper.home import Home
from tests.proxy_support import PY, direct, events, files_under, proxied, rows, write_policy

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]


def dump(result: object) -> dict:
    data = result.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[attr-defined]
    data.pop("_meta", None)
    return data


@pytest.fixture
def setup(tmp_path: Path, home: Home) -> tuple[Path, Path, Path]:
    policy = write_policy(tmp_path)
    workspace = tmp_path / "workspace"
    (workspace / "notes" / "hello.md").write_text("# Hello\n\nfirst note \u00e9\u202e\n")
    return policy, home.path, workspace


@pytest.mark.parametrize("mode", MODES)
async def test_reads_through_the_proxy_equal_direct_reads(setup: tuple[Path, Path, Path], mode: str) -> None:
    policy, home, workspace = setup
    calls = [("list_notes", {}), ("read_note", {"path": "notes/hello.md"}), ("search_notes", {"query": "first"})]
    async with direct([PY, "-m", "gatekeeper.demo.notes_server", str(workspace)], mode=mode) as d:
        expected = [dump(await d.call_tool(name, args)) for name, args in calls]
        expected_resource = dump(await d.read_resource("note://hello.md"))
        expected_prompt = dump(await d.get_prompt("summarize", {"path": "notes/hello.md"}))
    async with proxied(policy, home, mode) as p:
        assert p.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert [dump(await p.call_tool(name, args)) for name, args in calls] == expected
        assert dump(await p.read_resource("note://hello.md")) == expected_resource
        assert dump(await p.get_prompt("summarize", {"path": "notes/hello.md"})) == expected_prompt
        templates = await p.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["note://{name}"]


@pytest.mark.parametrize("mode", MODES)
async def test_tools_listed_by_policy(setup: tuple[Path, Path, Path], mode: str) -> None:
    policy, home, _ = setup
    async with proxied(policy, home, mode) as p:
        tools = {t.name: t for t in (await p.list_tools()).tools}
    assert set(tools) == {
        "read_note",
        "list_notes",
        "search_notes",
        "count_slowly",
        "create_note",
        "write_note",
        "gatekeeper_proposal_status",
    }
    assert "delete_note" not in tools  # denied: not named in the policy
    assert tools["create_note"].description.startswith("[Gatekeeper] Calling this tool does not write anything")
    assert tools["create_note"].output_schema is None
    assert tools["read_note"].output_schema is not None  # an allowed tool keeps the schema its server lists
    assert tools["gatekeeper_proposal_status"].annotations.read_only_hint is True


@pytest.mark.parametrize("mode", MODES)
async def test_a_write_only_proposes(setup: tuple[Path, Path, Path], mode: str) -> None:
    policy, home, workspace = setup
    before = files_under(workspace)
    body = "line one\n\u202eevil\u200b\n"
    async with proxied(policy, home, mode, client_info=None) as p:
        result = await p.call_tool("create_note", {"title": "Plans for Tuesday", "body": body})
        assert not result.is_error, result.content
        summary = result.structured_content
        assert summary["status"] == "pending_approval"
        assert summary["destination"] == "notes/plans-for-tuesday.md"
        assert summary["review_url"].endswith(f"/proposals/{summary['proposal_id']}")
        again = await p.call_tool("create_note", {"title": "Plans for Tuesday", "body": body})
        assert again.structured_content["proposal_id"] == summary["proposal_id"]
        assert again.structured_content["repeat"] is True
        status = await p.call_tool("gatekeeper_proposal_status", {"proposal_id": summary["proposal_id"]})
        assert status.structured_content["status"] == "pending"
    assert files_under(workspace) == before  # nothing reached the workspace
    ((content, sha, args, protocol, path),) = rows(
        home / "gatekeeper.db", "SELECT content, sha256, arguments, protocol_version, path FROM proposal"
    )
    assert content == body.encode() and sha == summary["sha256"] and path == "notes/plans-for-tuesday.md"
    assert json.loads(args) == {"title": "Plans for Tuesday", "body": body}
    assert protocol == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert [e[0] for e in events(home) if e[0].startswith("proposal")] == ["proposal_created", "proposal_repeated"]


async def test_exact_argument_object_is_recorded(setup: tuple[Path, Path, Path]) -> None:
    policy, home, _ = setup
    args = {"path": "notes/x.md", "body": "b", "extra": {"n": 12345678901234567890, "f": 1.5, "z": None, "s": "1"}}
    async with proxied(policy, home) as p:
        assert not (await p.call_tool("write_note", args)).is_error
    ((stored,),) = rows(home / "gatekeeper.db", "SELECT arguments FROM proposal")
    assert json.loads(stored) == args


async def test_existing_destination_and_limits_are_refused(setup: tuple[Path, Path, Path]) -> None:
    policy, home, _ = setup
    async with proxied(policy, home) as p:
        exists = await p.call_tool("write_note", {"path": "notes/hello.md", "body": "x"})
        assert exists.is_error and "already exists" in exists.content[0].text
        big = await p.call_tool("create_note", {"title": "big", "body": "x" * 1001})
        assert big.is_error and "1,001 bytes, over this tool's limit of 1,000" in big.content[0].text
        outside_glob = await p.call_tool("create_note", {"title": "", "body": "x"})  # slug: untitled → fine
        assert not outside_glob.is_error
        missing = await p.call_tool("write_note", {"path": "notes/a.md"})
        assert missing.is_error and "content is missing" in missing.content[0].text
        wrong_type = await p.call_tool("write_note", {"path": ["notes/a.md"], "body": "x"})
        assert wrong_type.is_error and "must be a string" in wrong_type.content[0].text
        template_missing = await p.call_tool("create_note", {"body": "x"})
        assert template_missing.is_error
    refused = events(home, "proposal_refused")
    assert len(refused) == 5
    assert rows(home / "gatekeeper.db", "SELECT count(*) FROM proposal") == [(1,)]


def _json_size(value: object) -> int:
    return len(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())


async def test_a_huge_extra_argument_is_refused_and_not_stored(setup: tuple[Path, Path, Path]) -> None:
    """6 bytes of content with a 12 MiB extra argument, under max_bytes 1000: refused, nothing kept."""
    from gatekeeper.canonical import sha256_hex
    from gatekeeper.proxy.intake import ARGUMENT_ALLOWANCE

    policy, home, workspace = setup
    before = files_under(workspace)
    huge = {"title": "small", "body": "6bytes", "padding": "p" * (12 * 1024 * 1024)}
    async with proxied(policy, home) as p:
        result = await p.call_tool("create_note", huge)
        assert result.is_error, result.structured_content
        text = result.content[0].text
        assert text.startswith("Not proposed: the arguments are 12,582,9")
        assert f"over this tool's limit of {8 + ARGUMENT_ALLOWANCE:,} bytes" in text
        assert "send only the arguments the tool needs" in text
        assert not (await p.call_tool("create_note", {"title": "small", "body": "6bytes"})).is_error
    assert files_under(workspace) == before
    assert rows(home / "gatekeeper.db", "SELECT count(*) FROM proposal") == [(1,)]  # only the small one
    ((_, _, payload),) = events(home, "proposal_refused")
    assert len(payload) < 2000
    assert json.loads(payload)["args_sha256"] == sha256_hex(
        json.dumps(huge, sort_keys=True, separators=(",", ":")).encode()
    )
    (size,) = rows(home / "gatekeeper.db", "SELECT max(length(payload)) FROM audit_event")[0]
    assert size < 2000  # no event kept the arguments either


async def test_an_argument_object_at_the_bound_is_accepted(setup: tuple[Path, Path, Path]) -> None:
    """The whole object may be the content's JSON size plus ARGUMENT_ALLOWANCE: exactly that passes, a byte more not."""
    from gatekeeper.proxy.intake import ARGUMENT_ALLOWANCE

    policy, home, _ = setup
    body = 'line "one"\n' + "x" * 900  # escapes count: the bound is on the JSON size
    limit = _json_size(body) + ARGUMENT_ALLOWANCE

    def args(title: str) -> dict[str, str]:
        base = {"title": title, "body": body, "extra": ""}
        return {**base, "extra": "e" * (limit - _json_size(base))}

    at, over = args("at"), args("over")
    over["extra"] += "e"
    assert _json_size(at) == limit and _json_size(over) == limit + 1
    async with proxied(policy, home) as p:
        accepted = await p.call_tool("create_note", at)
        refused = await p.call_tool("create_note", over)
    assert not accepted.is_error, accepted.content
    assert refused.is_error and f"{limit + 1:,} bytes as JSON, over this tool's limit of {limit:,}" in (
        refused.content[0].text
    )
    assert rows(home / "gatekeeper.db", "SELECT path FROM proposal") == [("notes/at.md",)]


async def test_denied_and_unknown_tools_are_refused_with_an_event(setup: tuple[Path, Path, Path]) -> None:
    policy, home, workspace = setup
    async with proxied(policy, home) as p:
        denied = await p.call_tool("delete_note", {"path": "notes/hello.md"})
        unknown = await p.call_tool("no_such_tool", {})
    assert denied.is_error and "not available through Gatekeeper" in denied.content[0].text
    assert unknown.is_error
    assert (workspace / "notes" / "hello.md").exists()
    assert [json.loads(e[2])["tool"] for e in events(home, "tool_denied")] == ["delete_note", "no_such_tool"]


@pytest.mark.parametrize("mode", MODES)
async def test_progress_and_logs_reach_the_host(setup: tuple[Path, Path, Path], mode: str) -> None:
    policy, home, _ = setup
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: object) -> None:
        logs.append(str(params.data))  # type: ignore[attr-defined]

    async with proxied(policy, home, mode, logging_callback=on_log, log_level="debug") as p:
        result = await p.call_tool("count_slowly", {"n": 3, "delay_ms": 10}, progress_callback=on_progress)
    assert not result.is_error
    assert [(v, t) for v, t, _ in progress] == [(1, 3), (2, 3), (3, 3)]
    assert progress[-1][2] == "step 3 of 3"
    assert logs == ["counted 1", "counted 2", "counted 3"]
    # Forwarding logs uses an API the SDK deprecates: that one warning is filtered (proxy/run.py),
    # so the host's log of the proxy's stderr stays free of it.
    assert "Warning" not in (home / "proxy-stderr.log").read_text()


async def test_hostile_destinations_are_refused_end_to_end(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    from tests.hostile_paths import HOSTILE

    policy, home, workspace = setup
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "linked").symlink_to(outside)  # a symlinked parent inside the workspace
    hostile = [h.replace("{ws}", str(workspace)) if isinstance(h, str) else h for h in HOSTILE]
    hostile += ["linked/x.md", "linked/deeper/x.md", "notes/hello.md"]
    before_ws, before_out = files_under(workspace), files_under(outside)
    async with proxied(policy, home) as p:
        for raw in hostile:
            result = await p.call_tool("write_note", {"path": raw, "body": "pwned"})
            assert result.is_error, f"{raw!r} was accepted: {result.structured_content}"
            assert result.content[0].text.startswith("Not proposed:")
        assert not (await p.call_tool("write_note", {"path": "notes/fine.md", "body": "ok"})).is_error
    assert files_under(workspace) == before_ws and files_under(outside) == before_out
    assert rows(home / "gatekeeper.db", "SELECT path FROM proposal") == [("notes/fine.md",)]
    assert len(events(home, "proposal_refused")) == len(hostile)
