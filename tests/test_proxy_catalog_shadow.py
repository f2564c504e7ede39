"""proxy/catalog: a server with ``unlisted: shadow`` offers its unnamed tools as shadow writes; others hide them."""

from __future__ import annotations

from pathlib import Path

from gatekeeper.policy import load_policy
from gatekeeper.proxy.catalog import PROPOSE_NOTE, SHADOW_NOTE, STATUS_TOOL, Catalog

POLICY = """\
version: 1
servers:
  vault:
    command: node
    workspace: ./ws
    {unlisted}
    tools:
      read_note: allow
      create_note:
        propose: {{path: {{arg: path}}, content: {{arg: content}}}}
      drop_note: deny
"""
LISTED = {
    name: {"name": name, "description": f"{name} does things", "inputSchema": {"type": "object"}}
    for name in ("read_note", "create_note", "drop_note", "rename_tag", "move_note")
}


def _catalog(tmp_path: Path, unlisted: str) -> Catalog:
    (tmp_path / "policy.yaml").write_text(POLICY.format(unlisted=unlisted))
    catalog = Catalog(load_policy(str(tmp_path / "policy.yaml")))
    catalog.listed["vault"] = dict(LISTED)
    catalog.pinned_ok["vault"] = set(LISTED)
    return catalog


def test_unlisted_tools_become_shadow_writes(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path, "unlisted: shadow")
    tools = {t["name"]: t for t in catalog.host_tools()}
    assert set(tools) == {"read_note", "create_note", "rename_tag", "move_note", STATUS_TOOL["name"]}
    assert tools["rename_tag"]["description"].startswith(SHADOW_NOTE)
    assert tools["create_note"]["description"].startswith(PROPOSE_NOTE)
    route = catalog.route("move_note")
    assert route is not None and route.rule.propose is not None and route.rule.propose.mode == "shadow"
    assert catalog.route("drop_note") is None  # named deny stays denied


def test_without_unlisted_shadow_unnamed_tools_stay_hidden(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path, "")
    assert {t["name"] for t in catalog.host_tools()} == {"read_note", "create_note", STATUS_TOOL["name"]}
    assert catalog.route("rename_tag") is None
