"""The workspace root's real path: recorded by the proxy with each proposal, shown to the reviewer
and by ``audit show``. (The committer's refusal when the root moves is in test_commit_hostile.py.)"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gatekeeper.cli import cli
from gatekeeper.home import Home
from gatekeeper.store.store import Store
from tests.helpers import draft
from tests.proxy_support import events, proxied, rows, write_policy
from tests.review_support import Page, hashed, review_server


def _linked_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """tmp/workspace is a symlink to tmp/real-workspace: a root configured through a link."""
    real = tmp_path / "real-workspace"
    (real / "notes").mkdir(parents=True)
    (tmp_path / "workspace").symlink_to(real)
    return tmp_path / "workspace", real


@pytest.mark.anyio
async def test_the_proxy_records_where_the_workspace_really_is(tmp_path: Path, home: Home) -> None:
    link, real = _linked_workspace(tmp_path)
    policy = write_policy(tmp_path)
    async with proxied(policy, home.path) as p:
        result = await p.call_tool("write_note", {"path": "notes/x.md", "body": "x"})
        assert not result.is_error, result.content
    assert rows(home.db_path, "SELECT workspace, workspace_real FROM proposal") == [(str(link), str(real))]
    ((_, _, payload),) = events(home.path, "proposal_created")
    assert json.loads(payload)["workspace_real"] == str(real)  # in the hash chain too


def _propose_linked(home: Home, link: Path, real: Path) -> str:
    with Store(home.db_path) as s:
        d = dataclasses.replace(draft("notes/a.md", b"a\n"), workspace=str(link), workspace_real=str(real))
        return s.propose(d).id


def test_the_review_page_shows_where_a_linked_workspace_leads(tmp_path: Path, home: Home) -> None:
    link, real = _linked_workspace(tmp_path)
    pid = _propose_linked(home, link, real)
    with Store(home.db_path) as s:
        s.add_reviewer("alice", hashed())
        same = s.propose(
            dataclasses.replace(draft("notes/b.md", b"b\n"), workspace=str(real), workspace_real=str(real))
        ).id
    with review_server(home) as base:
        page = Page(base)
        assert page.login().status_code == 303
        html = page.client.get(f"/proposals/{pid}").text
        assert f'<code class="path" id="workspace-real">{real}</code>' in html
        assert f'<code class="path">{link}</code> resolves to' in html
        assert 'id="workspace-real"' not in page.client.get(f"/proposals/{same}").text  # no noise when equal


def test_audit_show_names_the_real_workspace(tmp_path: Path, home: Home) -> None:
    link, real = _linked_workspace(tmp_path)
    pid = _propose_linked(home, link, real)
    result = CliRunner().invoke(cli, ["audit", "show", pid], catch_exceptions=False)
    # Off a terminal the table is 80 columns wide and folds a longer value (a deep tmp path, as
    # under pytest-xdist): compare with the whitespace (and so the folds) taken out.
    assert result.exit_code == 0 and _squeezed(f"{link} (resolves to {real})") in _squeezed(result.output)
    with Store(home.db_path) as s:
        old = s.propose(draft("notes/old.md", b"old\n")).id  # no real path: as rows from before 0004
    shown = CliRunner().invoke(cli, ["audit", "show", old], catch_exceptions=False).output
    assert "real path not recorded" in shown


def _squeezed(text: str) -> str:
    return "".join(text.split())
