"""Shadow rules in policy.yaml: their keys, their defaults, ``unlisted: shadow``, and url servers refused."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gatekeeper.errors import PolicyError
from gatekeeper.policy import load_policy

BASE = """\
version: 1
servers:
  vault:
    command: node
    workspace: ./ws
    tools:
      read_note: allow
"""


def _load(tmp_path: Path, text: str) -> object:
    (tmp_path / "policy.yaml").write_text(text, encoding="utf-8")
    return load_policy(str(tmp_path / "policy.yaml"))


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(PolicyError) as info:
        _load(tmp_path, text)
    return str(info.value)


def test_a_shadow_rule_needs_no_path_and_gets_its_limits(tmp_path: Path) -> None:
    policy = _load(tmp_path, BASE + "      move_note:\n        propose: {mode: shadow, ignore: ['.obsidian-mcp/**']}\n")
    rule = policy.rule("vault", "move_note").propose  # type: ignore[attr-defined]
    assert rule.mode == "shadow" and rule.path is None
    assert rule.ignore == (".obsidian-mcp/**",)
    assert (rule.timeout, rule.max_files, rule.max_total_bytes) == (timedelta(seconds=60), 1000, 64 * 1024 * 1024)


def test_the_limits_are_part_of_the_digest(tmp_path: Path) -> None:
    one = _load(tmp_path, BASE + "      t:\n        propose: {mode: shadow, max_files: 10}\n")
    two = _load(tmp_path, BASE + "      t:\n        propose: {mode: shadow, max_files: 11}\n")
    assert one.digest != two.digest  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "rule, expected",
    [
        ("{mode: shadow, path: {arg: p}}", "'path' has no meaning for mode 'shadow'"),
        ("{mode: shadow, content: {arg: c}}", "'content' has no meaning for mode 'shadow'"),
        ("{mode: shadow, file_mode: '0600'}", "'file_mode' has no meaning for mode 'shadow'"),
        ("{mode: create, path: {arg: p}, content: {arg: c}, ignore: ['x']}", "'ignore' belongs to mode 'shadow'"),
        ("{mode: delete, path: {arg: p}, timeout: 5s}", "'timeout' belongs to mode 'shadow'"),
        ("{mode: delete}", "mode 'delete' needs 'path'"),
        ("{mode: shadow, max_files: 0}", "max_files"),
        ("{mode: shadow, ignore: ['[x']}", "ignore"),
    ],
)
def test_keys_that_do_not_fit_the_mode_are_refused(tmp_path: Path, rule: str, expected: str) -> None:
    assert expected in _error(tmp_path, BASE + f"      t:\n        propose: {rule}\n")


def test_unlisted_shadow_makes_every_unnamed_tool_a_shadow_write(tmp_path: Path) -> None:
    policy = _load(tmp_path, BASE.replace("    tools:", "    unlisted: shadow\n    tools:"))
    assert policy.rule("vault", "read_note").action == "allow"  # type: ignore[attr-defined]
    other = policy.rule("vault", "obsidian_rename_tag")  # type: ignore[attr-defined]
    assert other.action == "propose" and other.propose.mode == "shadow"
    plain = _load(tmp_path, BASE)
    assert plain.rule("vault", "obsidian_rename_tag").action == "deny"  # type: ignore[attr-defined]


def test_unlisted_takes_only_deny_or_shadow(tmp_path: Path) -> None:
    assert "unlisted" in _error(tmp_path, BASE.replace("    tools:", "    unlisted: allow\n    tools:"))


URL = """\
version: 1
servers:
  remote:
    url: http://127.0.0.1:9/mcp
    workspace: ./ws
"""


def test_a_url_server_cannot_be_shadowed(tmp_path: Path) -> None:
    message = _error(tmp_path, URL + "    tools:\n      t:\n        propose: {mode: shadow}\n")
    assert "a 'url' server cannot be shadowed" in message and "tools.t" in message
    message = _error(tmp_path, URL + "    unlisted: shadow\n")
    assert "unlisted: shadow" in message and "a 'url' server cannot be shadowed" in message


def test_policy_check_says_what_happens_to_unlisted_tools(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "ws").mkdir()
    (tmp_path / "policy.yaml").write_text(BASE.replace("    tools:", "    unlisted: shadow\n    tools:"))
    argv = [
        sys.executable,
        "-m",
        "gatekeeper",
        "policy",
        "check",
        "--no-start",
        "--policy",
        str(tmp_path / "policy.yaml"),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert "Tools not named above are shadow writes on vault" in out
    assert "are denied" not in out
