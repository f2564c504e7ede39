"""Changes to existing files, end to end: Gatekeeper as a stdio subprocess driven by the official MCP
client, in front of the REAL filesystem server (write_file as replace, edit_file as edit) and the real
obsidian-mcp (obsidian_edit_note as append). Each proposal's base and result in the store are exact,
an edit's dry run answers with the diff and records nothing, every hostile call gets a precise
refusal, and no file on disk changes (invariant 1: only the committer writes)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from tests.obsidian_support import make_vault, obsidian_launch
from tests.peers.external import filesystem_server
from tests.proxy_support import proxied, rows

pytestmark = pytest.mark.anyio

LIMIT = 4096


def snapshot(root: Path) -> dict[str, Any]:
    """Everything under ``root`` without following symlinks: bytes of files, targets of links, kinds."""
    out: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("symlink", os.readlink(path))
        elif path.is_file():
            out[rel] = path.read_bytes()
        else:
            out[rel] = ("fifo" if path.is_fifo() else "folder",)
    return out


def fs_policy(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    (workspace / "notes").mkdir(parents=True)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"version: 1\nservers:\n  files:\n    command: {filesystem_server()}\n    args: [{str(workspace)!r}]\n"
        f"    workspace: {workspace}\n    tools:\n      read_text_file: allow\n"
        "      write_file:\n        propose:\n          mode: replace\n          create_if_missing: true\n"
        f"          path: {{arg: path}}\n          content: {{arg: content}}\n          max_bytes: {LIMIT}\n"
        f"      edit_file:\n        propose:\n          mode: edit\n          path: {{arg: path}}\n"
        f"          max_bytes: {LIMIT}\n"
    )
    return policy, workspace


def proposals(home: Home) -> list[tuple[Any, ...]]:
    return rows(
        home.path / "gatekeeper.db",
        "SELECT path, mode, base, base_sha256, base_size, content, sha256, size FROM proposal ORDER BY created_at, id",
    )


def change_row(path: str, mode: str, base: bytes | None, result: bytes) -> tuple[Any, ...]:
    base_sha = None if base is None else hashlib.sha256(base).hexdigest()
    base_size = None if base is None else len(base)
    return (path, mode, base, base_sha, base_size, result, hashlib.sha256(result).hexdigest(), len(result))


def text_of(result: Any) -> str:
    return result.content[0].text


async def test_filesystem_server_writes_and_edits_become_exact_change_proposals(tmp_path: Path, home: Home) -> None:
    policy, ws = fs_policy(tmp_path)
    log = b"# Log\r\nalpha\nbeta\ngamma\n"
    (ws / "notes/log.md").write_bytes(log)
    (ws / "notes/plan.md").write_bytes(b"plan v1\n")
    (ws / "notes/price.md").write_bytes("total: 10\u200b0 EUR\nx\nx\n".encode())
    (ws / "notes/blob.bin").write_bytes(b"ok\n\xff\xfe\x00")
    (ws / "notes/big.md").write_bytes(b"x" * (LIMIT + 1))
    (ws / "notes/folder.md").mkdir()
    os.mkfifo(ws / "notes/pipe.md")
    (ws / "notes/link.md").symlink_to("plan.md")
    before = snapshot(ws)
    expected: list[tuple[Any, ...]] = []

    async with proxied(policy, home.path) as p:
        tools = {t.name: t for t in (await p.list_tools()).tools}
        assert {"read_text_file", "write_file", "edit_file"} <= set(tools)

        # write_file over an existing file: a replace, with the exact base
        answer = await p.call_tool("write_file", {"path": str(ws / "notes/plan.md"), "content": "plan v2\nmore\n"})
        assert not answer.is_error, text_of(answer)
        assert text_of(answer).startswith("Proposed, not written: replace notes/plan.md: 8 → 13 bytes (+5)")
        assert "/proposals/" in text_of(answer)
        s = answer.structured_content
        assert s["mode"] == "replace" and s["base_size"] == 8 and s["size"] == 13
        assert s["base_sha256"] == hashlib.sha256(b"plan v1\n").hexdigest()
        expected.append(change_row("notes/plan.md", "replace", b"plan v1\n", b"plan v2\nmore\n"))

        # write_file on a missing path: create_if_missing makes it a create (today's answer)
        answer = await p.call_tool("write_file", {"path": "notes/new.md", "content": "new\n"})
        assert not answer.is_error, text_of(answer)
        assert text_of(answer).startswith("Proposed, not written: notes/new.md (4 bytes")
        assert "mode" not in answer.structured_content
        expected.append(change_row("notes/new.md", "create", None, b"new\n"))

        # edit_file: two edits in order, CRLF and everything else kept byte for byte
        edits = [{"oldText": "beta", "newText": "BETA\nbeta2"}, {"oldText": "beta2\n", "newText": ""}]
        answer = await p.call_tool("edit_file", {"path": str(ws / "notes/log.md"), "edits": edits})
        assert not answer.is_error, text_of(answer)
        result = b"# Log\r\nalpha\nBETA\ngamma\n"
        assert text_of(answer).startswith(f"Proposed, not written: edit notes/log.md: {len(log)} → {len(result)} bytes")
        expected.append(change_row("notes/log.md", "edit", log, result))

        # dryRun: the diff, nothing recorded
        count = len(proposals(home))
        answer = await p.call_tool(
            "edit_file", {"path": "notes/log.md", "edits": [{"oldText": "gamma", "newText": "GAMMA"}], "dryRun": True}
        )
        assert not answer.is_error, text_of(answer)
        assert text_of(answer).startswith("Dry run, nothing proposed or written: edit notes/log.md: 24 → 24 bytes (+0)")
        assert "```diff\n--- a/notes/log.md\n+++ b/notes/log.md\n" in text_of(answer)
        assert "\n-gamma\n+GAMMA\n" in answer.structured_content["diff"]
        assert len(proposals(home)) == count

        async def refused(tool: str, args: dict[str, Any], *needles: str) -> None:
            answer = await p.call_tool(tool, args)
            assert answer.is_error, f"{tool} {args} was not refused"
            text = text_of(answer)
            assert text.startswith("Not proposed: "), text
            for needle in needles:
                assert needle in text, text

        def one(old: Any, new: Any = "x") -> list[dict[str, Any]]:
            return [{"oldText": old, "newText": new}]

        price = "notes/price.md"
        await refused("edit_file", {"path": price, "edits": one("")}, "edit 1 of 1: oldText is empty")
        await refused(
            "edit_file",
            {"path": price, "edits": [{"oldText": "total", "newText": "sum"}, {"oldText": "x\n", "newText": "y"}]},
            "edit 2 of 2: oldText found 2 times in notes/price.md",
            "add surrounding lines so it matches once",
        )
        await refused("edit_file", {"path": price, "edits": one("nope")}, "edit 1 of 1: oldText not found in")
        await refused(
            "edit_file",
            {"path": price, "edits": one("100 EUR")},
            "would match if invisible characters were ignored",
            "U+200B ZERO WIDTH SPACE",
        )
        await refused("edit_file", {"path": price, "edits": []}, "'edits' must be a non-empty list")
        no_new = [{"oldText": "total"}]
        await refused("edit_file", {"path": price, "edits": no_new}, "edit 1 of 1: 'newText' is missing")
        await refused("edit_file", {"path": price, "edits": one("total"), "dryRun": "yes"}, "dryRun must be true")
        await refused("edit_file", {"path": "notes/none.md", "edits": one("a")}, "notes/none.md does not exist")
        await refused("write_file", {"path": "notes/folder.md", "content": "x"}, "is a folder, not a file")
        await refused("edit_file", {"path": "notes/folder.md", "edits": one("a")}, "is a folder")
        await refused("edit_file", {"path": "notes/pipe.md", "edits": one("a")}, "not a regular file")
        await refused("write_file", {"path": "notes/pipe.md", "content": "x"}, "not a regular file")
        await refused("write_file", {"path": "notes/link.md", "content": "x"}, "symbolic link")
        await refused("edit_file", {"path": "notes/link.md", "edits": one("plan")}, "symbolic link")
        await refused("write_file", {"path": "notes/big.md", "content": "x"}, f"{LIMIT + 1:,} bytes, over", "limit")
        await refused("edit_file", {"path": "notes/blob.bin", "edits": one("ok")}, "is not UTF-8 text (byte 3 of 6)")
        await refused(
            "write_file", {"path": "notes/plan.md", "content": "y" * (LIMIT + 1)}, f"{LIMIT + 1:,} bytes, over"
        )
        await refused(
            "edit_file",
            {"path": "notes/plan.md", "edits": one("plan v1\n", "z" * (LIMIT + 1))},
            f"the resulting file would be {LIMIT + 1:,} bytes, over this tool's limit",
        )
        await refused("write_file", {"path": "notes/plan.md", "content": "plan v1\n"}, "exactly as it is")
        await refused("write_file", {"path": "notes/sub/deep.md/../x", "content": "x"}, "refused")

        # nothing was written, and the allowed read still sees the old bytes through the proxy
        read = await p.call_tool("read_text_file", {"path": str(ws / "notes/plan.md")})
        assert "plan v1" in text_of(read)

    assert proposals(home) == expected
    assert snapshot(ws) == before
    kinds = [k for (k,) in rows(home.path / "gatekeeper.db", "SELECT kind FROM audit_event")]
    assert kinds.count("proposal_refused") >= 19


async def test_obsidian_append_through_gatekeeper(tmp_path: Path, home: Home) -> None:
    vault = make_vault(tmp_path / "vault")
    (vault / "daily").mkdir()
    base = b"# Log\nfirst line"
    (vault / "daily/log.md").write_bytes(base)
    command, env = obsidian_launch(vault)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nservers:\n  obsidian:\n"
        f"    command: {json.dumps(command[0])}\n    args: {json.dumps(command[1:])}\n"
        f"    env: {json.dumps(env)}\n    workspace: {vault}\n    tools:\n"
        "      obsidian_read_note: allow\n"
        '      obsidian_edit_note:\n        propose:\n          mode: append\n          separator: "\\n"\n'
        "          path: {arg: path}\n          content: {arg: content}\n          globs: ['**/*.md']\n"
        "          when: {operation: append, vault: notes}\n"
    )
    before = {k: v for k, v in snapshot(vault).items() if not k.startswith(".obsidian-mcp")}
    async with proxied(policy, home.path) as p:
        args = {"vault": "notes", "path": "daily/log.md", "operation": "append", "content": "second line\n"}
        answer = await p.call_tool("obsidian_edit_note", args)
        assert not answer.is_error, text_of(answer)
        assert text_of(answer).startswith("Proposed, not written: append to daily/log.md: 16 → 29 bytes (+13)")
        for operation in ("prepend", "replace"):
            answer = await p.call_tool("obsidian_edit_note", {**args, "operation": operation})
            assert answer.is_error
            assert f'with operation = "append"; got "{operation}"' in text_of(answer)
        answer = await p.call_tool("obsidian_edit_note", {**args, "vault": "other"})
        assert answer.is_error and 'vault = "notes"' in text_of(answer)
        answer = await p.call_tool("obsidian_edit_note", {**args, "path": "daily/log"})
        assert answer.is_error and "refused" in text_of(answer)  # obsidian would add .md: the glob wants it said
        read = await p.call_tool("obsidian_read_note", {"vault": "notes", "path": "daily/log.md"})
        assert not read.is_error and read.structured_content["data"]["content"] == "# Log\nfirst line"
    result = b"# Log\nfirst line\nsecond line\n"
    assert proposals(home) == [change_row("daily/log.md", "append", base, result)]
    assert {k: v for k, v in snapshot(vault).items() if not k.startswith(".obsidian-mcp")} == before
