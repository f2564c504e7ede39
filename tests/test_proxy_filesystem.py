"""The reference filesystem server (npm) behind the proxy: it asks for roots/list after the
handshake (ids tracked per direction), reads pass through, write_file only proposes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatekeeper.home import Home
from tests.peers.external import filesystem_server
from tests.proxy_support import direct, files_under, proxied, rows

pytestmark = pytest.mark.anyio


def fs_policy(tmp_path: Path, binary: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "shared"
    workspace.mkdir()
    (workspace / "hello.txt").write_text("hello from the filesystem server\n")
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"version: 1\nservers:\n  files:\n    command: {binary}\n    args: [{str(workspace)!r}]\n"
        f"    workspace: {workspace}\n    tools:\n      read_text_file: allow\n      list_directory: allow\n"
        "      write_file:\n        propose:\n          path: {arg: path}\n          content: {arg: content}\n"
    )
    return policy, workspace


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("downstream", ["auto", "legacy"])
async def test_filesystem_server_behind_the_proxy(tmp_path: Path, home: Home, mode: str, downstream: str) -> None:
    binary = filesystem_server()
    policy, workspace = fs_policy(tmp_path, binary)
    target = str(workspace / "hello.txt")
    async with direct([str(binary), str(workspace)], mode="legacy") as d:
        expected = (await d.call_tool("read_text_file", {"path": target})).model_dump(exclude={"meta"})
    async with proxied(policy, home.path, mode, proxy_args=("--downstream-mode", downstream)) as p:
        names = {t.name for t in (await p.list_tools()).tools}
        assert {"read_text_file", "list_directory", "write_file"} <= names and "edit_file" not in names
        assert (await p.call_tool("read_text_file", {"path": target})).model_dump(exclude={"meta"}) == expected
        proposed = await p.call_tool("write_file", {"path": str(workspace / "new.txt"), "content": "new\n"})
        assert not proposed.is_error and proposed.structured_content["destination"] == "new.txt"
        overwrite = await p.call_tool("write_file", {"path": target, "content": "clobber\n"})
        assert overwrite.is_error and "already exists" in overwrite.content[0].text
        denied = await p.call_tool("move_file", {"source": target, "destination": str(workspace / "x.txt")})
        assert denied.is_error
        # the session survived the server's own roots/list request
        assert not (await p.call_tool("list_directory", {"path": str(workspace)})).is_error
    assert files_under(workspace) == {"hello.txt": b"hello from the filesystem server\n"}
    assert rows(home.path / "gatekeeper.db", "SELECT path, content FROM proposal") == [("new.txt", b"new\n")]
