"""Committed changes for tests of revert and the audit: a home, a workspace, a policy, and a
proposal of any mode approved and committed through the store's own calls, the file step done by
the test (the committer's change support is another helper's work)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.canonical import sha256_hex
from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from tests.helpers import PROOF, add_reviewer, draft, record_commit

POLICY = """version: 1
review_url: http://127.0.0.1:9876
servers:
  notes:
    command: python
    workspace: {workspace}
    tools:
      create_note:
        propose:
          path: {{arg: path}}
          content: {{arg: content}}
          globs: ["notes/**"]
"""


@dataclasses.dataclass
class Place:
    home: Home
    workspace: Path
    policy: Path

    def commit(self, path: str, mode: str, result: bytes, base: bytes | None = None, *, on_disk: bool = True) -> str:
        """A proposal of ``mode`` approved and committed; with ``on_disk`` the file is left as it would be."""
        target = self.workspace / path
        content = b"" if mode == "delete" else result
        d = dataclasses.replace(
            draft(path, content, arguments={"path": path, "n": os.urandom(4).hex()}),
            workspace=str(self.workspace),
            workspace_real=os.path.realpath(self.workspace),
            mode=mode,
            base=base,
        )
        with Store(self.home.db_path) as s:
            p = s.propose(d)
            s.decide(
                p.id,
                verdict="approved",
                reviewer="alice",
                sha256=p.sha256,
                path=path,
                mode=mode,
                base_sha256=None if base is None else sha256_hex(base),
                proof=PROOF,
            )
            outcome = {"create": "created", "delete": "deleted"}.get(mode, "applied")
            if on_disk:
                target.parent.mkdir(parents=True, exist_ok=True)
                if mode == "delete":
                    target.unlink()
                else:
                    target.write_bytes(result)
            record_commit(s, p.id, outcome, observed_sha256=p.sha256, final_path=str(target))
        return p.id

    def detail(self, pid: str) -> dict[str, Any]:
        with Reader(self.home.db_path) as r:
            found = r.proposal(pid)
        assert found is not None
        return found


@pytest.fixture
def place(home: Home, tmp_path: Path) -> Place:
    workspace = tmp_path / "ws"
    (workspace / "notes").mkdir(parents=True)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(workspace=workspace))
    with Store(home.db_path) as s:
        add_reviewer(s)
    return Place(home, workspace, policy)
