"""Pin digests stay byte for byte what they were when tools became plain wire dicts (issue 12).

A pin is the sha256 of a tool's canonical definition (proxy/catalog.py). It was always taken of
the SDK ``Tool``'s dump; the proxy now keeps the raw wire dicts a server lists, rebuilt into that
dump without the SDK (``tooldef.tool_dump``, what proxy/listing.py keeps), and digests those. If
the two ever differ, every deployed pin reads as a changed definition and every tool is withheld
until a person re-accepts it. The SDK is the oracle here:
``canonical_json(Tool.model_validate(raw).model_dump(mode="json", by_alias=True, exclude_none=True))``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from gatekeeper.canonical import canonical_json, sha256_hex
from gatekeeper.home import Home
from gatekeeper.proxy.catalog import definition
from gatekeeper.proxy.tooldef import tool_dump
from tests.peers.external import filesystem_server
from tests.peers.listings import RECORDED, raw_listing
from tests.proxy_support import REPO, proxied, rows, write_policy

RECORDINGS = sorted(RECORDED.glob("*.json"))


def oracle(raw: Any) -> tuple[str, str]:
    """The digest and canonical text the proxy has always pinned for this listed tool."""
    dumped = mcp_types.Tool.model_validate(raw).model_dump(mode="json", by_alias=True, exclude_none=True)
    text = canonical_json(dumped, allow_floats=True)
    return sha256_hex(text.encode("utf-8")), text


def through_the_proxy(raw: Any) -> tuple[str, str]:
    """What the proxy pins now: the raw listed tool, rebuilt as the model's dump (proxy/tooldef.py), digested."""
    return definition(tool_dump(raw))


def variants(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Shapes a server may send that the model normalises: nulls, unknown keys, nested extras."""
    hints = {"readOnlyHint": True, "openWorldHint": None, "vendorHint": "x"}
    return [
        {**raw, "title": None, "outputSchema": None, "icons": None},
        {**raw, "vendorField": {"a": 1}, "annotations": hints},
        {**raw, "_meta": {"vendor/key": [1, 2.5, None]}, "execution": {"taskSupport": "optional"}},
        {**raw, "inputSchema": {**raw["inputSchema"], "properties": {"n": {"type": "number", "default": 1.0}}}},
    ]


def test_the_recordings_are_there() -> None:
    assert {p.stem for p in RECORDINGS} >= {"notes", "probe", "npm_filesystem", "git", "old_sdk_notes", "everything"}


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_each_recorded_real_tool_is_pinned_as_the_sdk_model_digests_it(recording: Path) -> None:
    tools = json.loads(recording.read_text())
    assert tools, recording
    for raw in tools:
        assert through_the_proxy(raw) == oracle(raw), raw["name"]
        for variant in variants(raw):
            assert through_the_proxy(variant) == oracle(variant), raw["name"]


def test_a_wire_dict_that_kept_what_the_model_drops_would_change_the_digest() -> None:
    """The check above can fail: a raw dict with a null or an unknown key is not the model's dump."""
    raw = json.loads((RECORDED / "notes.json").read_text())[0]
    assert definition({**raw, "title": None}) != oracle({**raw, "title": None})
    assert definition({**raw, "vendorField": 1}) != oracle({**raw, "vendorField": 1})


@pytest.mark.anyio
async def test_the_running_proxy_pins_real_servers_tools_to_the_oracles_digest(tmp_path: Path, home: Home) -> None:
    """End to end: the proxy lists the notes, probe and npm filesystem servers; each pin it stored
    equals the oracle's digest of the tool as that server itself puts it on the wire."""
    binary = filesystem_server()
    policy = write_policy(tmp_path, probe=True)
    files = tmp_path / "files"
    files.mkdir()
    read_only = ("read_text_file", "list_directory", "get_file_info", "directory_tree", "search_files")
    policy.write_text(
        policy.read_text()
        + f"  files:\n    command: {binary}\n    args: [{str(files)!r}]\n    workspace: {files}\n    tools:\n"
        + "".join(f"      {name}: allow\n" for name in read_only)
        + "      write_file:\n        propose:\n          path: {arg: path}\n          content: {arg: content}\n"
    )
    async with proxied(policy, home.path) as host:
        listed = {t.name for t in (await host.list_tools()).tools}
    workspace = tmp_path / "workspace"
    direct = {
        "notes": raw_listing([sys.executable, "-m", "gatekeeper.demo.notes_server", str(workspace)], cwd=REPO),
        "probe": raw_listing([sys.executable, "-m", "tests.peers.probe_server"], cwd=REPO),
        "files": raw_listing([str(binary), str(files)], cwd=REPO),
    }
    pinned = {
        (server, tool): (digest, text)
        for server, tool, digest, text in rows(
            home.path / "gatekeeper.db", "SELECT server, tool, digest, definition FROM tool_definition"
        )
    }
    expected = {
        (server, raw["name"]): oracle(raw)
        for server, tools in direct.items()
        for raw in tools
        if (server, raw["name"]) in pinned
    }
    assert {"notes__read_note", "probe__echo", "files__read_text_file", "files__write_file"} <= listed
    assert {("files", "write_file"), ("files", "read_text_file"), ("probe", "put"), ("notes", "create_note")} <= set(
        expected
    )
    assert len(pinned) >= 20 and pinned == expected
