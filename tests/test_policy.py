"""policy.yaml loading: the example works, and every mistake names file, line, key path and fix."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gatekeeper.errors import InvalidInput, PolicyError
from gatekeeper.policy import (
    RESERVED_TOOL,
    Policy,
    TemplateRenderError,
    glob_match,
    load_policy,
    render_template,
    slug,
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "policy.yaml"

# Line numbers in the expected messages below refer to this text (plus what a case appends).
BASE = """\
version: 1
servers:
  notes:
    command: python
    workspace: ./ws
    tools:
      read_note: allow
"""

PROPOSE = """\
      create_note:
        propose:
          path: {arg: path}
          content: {arg: content}
"""


def write(folder: Path, text: str, name: str = "policy.yaml") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> str:
    """Load ``text`` as ./policy.yaml and return the PolicyError message."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path, text)
    with pytest.raises(PolicyError) as info:
        load_policy("policy.yaml")
    return str(info.value)


# ---------------------------------------------------------------- the example


def test_example_policy_loads_and_describes_itself():
    policy = load_policy(EXAMPLE)
    assert policy.source == EXAMPLE
    assert policy.base_dir == REPO
    assert policy.version == 1
    assert policy.review_url == "http://localhost:8765"
    notes = policy.servers["notes"]
    assert notes.command == "python"
    assert notes.args == ("-m", "gatekeeper.demo.notes_server", "./workspace")
    assert notes.workspace == REPO / "workspace"
    assert notes.cwd == REPO
    rows = {row["tool"]: row for row in policy.describe()}
    assert list(rows) == ["read_note", "list_notes", "search_notes", "create_note"]
    for tool in ("read_note", "list_notes", "search_notes"):
        assert rows[tool]["action"] == "allow"
        assert rows[tool]["host_name"] == tool
        assert rows[tool]["path"] is None
    assert rows["create_note"] == {
        "mode": "create",
        "server": "notes",
        "tool": "create_note",
        "host_name": "create_note",
        "action": "propose",
        "path": "template:notes/{{ args.title | slug }}.md",
        "content": "arg:body",
        "edits": None,
        "when": None,
        "encoding": "text",
        "globs": ["notes/**/*.md"],
        "max_bytes": 65536,
        "expires_after": 86400,
        "file_mode": "0644",
        "wait_seconds": 0,
    }
    assert policy.exposed_tools() == {tool: ("notes", tool) for tool in rows}


def test_digest_ignores_comments_and_layout_but_not_values(tmp_path):
    original = write(tmp_path, EXAMPLE.read_text())
    data = yaml.safe_load(EXAMPLE.read_text())
    flow = write(tmp_path, yaml.safe_dump(data, default_flow_style=True, sort_keys=True), "flow.yaml")
    digest = load_policy(original).digest
    assert len(digest) == 64
    assert load_policy(flow).digest == digest
    assert load_policy(original).digest == digest
    data["servers"]["notes"]["tools"]["create_note"]["propose"]["max_bytes"] = 1000
    changed = write(tmp_path, yaml.safe_dump(data), "changed.yaml")
    assert load_policy(changed).digest != digest


def test_defaults_are_inherited_by_rules_that_leave_them_out(tmp_path):
    text = BASE.replace("servers:", "defaults:\n  max_bytes: 100\n  expires_after: 90m\nservers:", 1)
    text += PROPOSE + "      other:\n        propose:\n          path: {arg: p}\n          content: {arg: c}\n"
    text += "          max_bytes: 7\n"
    policy = load_policy(write(tmp_path, text))
    inherited = policy.rule("notes", "create_note").propose
    assert inherited is not None
    assert inherited.max_bytes == 100
    assert inherited.expires_after == timedelta(minutes=90)
    assert inherited.globs == ("**",)
    assert inherited.file_mode is None  # unset: a new file gets 0644, a changed file keeps its own
    assert inherited.new_file_mode == 0o644
    own = policy.rule("notes", "other").propose
    assert own is not None and own.max_bytes == 7
    assert policy.rule("notes", "not_named").action == "deny"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("24h", timedelta(hours=24)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("3650d", timedelta(days=3650)),
    ],
)
def test_durations_take_every_unit_that_since_takes(tmp_path, text, expected):
    """policy.yaml and ``audit --since`` share one duration grammar (weeks included)."""
    policy = load_policy(write(tmp_path, BASE.replace("servers:", f"defaults:\n  expires_after: {text}\nservers:", 1)))
    assert policy.defaults.expires_after == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("0s", "longer than zero"),
        ("3651d", "at most 3650d"),
        ("99999999999999999999w", "at most 3650d"),
        ("1y", "expected a duration"),
        ("١h", "expected a duration"),
    ],
)
def test_durations_out_of_range_or_unknown_are_refused(tmp_path, text, message):
    path = write(tmp_path, BASE.replace("servers:", f"defaults:\n  expires_after: {text}\nservers:", 1))
    with pytest.raises(PolicyError, match=message):
        load_policy(path)


# ---------------------------------------------------------------- broken policies

BROKEN = {
    "misspelt key": (
        BASE.replace("    command:", "    comand:"),
        "policy.yaml:4: servers.notes: unknown key 'comand' (did you mean 'command'?)",
    ),
    "missing required key": (
        BASE.replace("    workspace: ./ws\n", ""),
        "policy.yaml:3: servers.notes: missing required key 'workspace'",
    ),
    "bad tool action": (
        BASE.replace("read_note: allow", "read_note: alow"),
        "policy.yaml:7: servers.notes.tools.read_note: expected 'allow', 'deny' or a mapping with 'propose',"
        " got 'alow' (did you mean 'allow'?)",
    ),
    "rule mapping without propose": (
        BASE + "      create_note:\n        proposal: {}\n",
        "policy.yaml:8: servers.notes.tools.create_note: expected 'allow', 'deny' or a mapping with"
        " 'propose', got a mapping with 'proposal' (did you mean 'propose'?)",
    ),
    "both arg and template": (
        BASE + PROPOSE.replace("{arg: path}", "{arg: path, template: x}"),
        "policy.yaml:10: servers.notes.tools.create_note.propose.path: give exactly one of 'arg' or 'template'",
    ),
    "neither arg nor template": (
        BASE + PROPOSE.replace("{arg: content}", "{}"),
        "policy.yaml:11: servers.notes.tools.create_note.propose.content: give exactly one of 'arg' or 'template'",
    ),
    "template syntax error": (
        BASE + PROPOSE.replace("{arg: path}", "{template: 'in/{{ args.title | slug }.md'}"),
        "policy.yaml:10: servers.notes.tools.create_note.propose.path.template:"
        " template syntax error: unexpected '}' (template line 1)",
    ),
    "bad glob": (
        BASE + PROPOSE + "          globs: ['notes/*.md', 'a/[b']\n",
        "policy.yaml:12: servers.notes.tools.create_note.propose.globs[1]: glob 'a/[b' has an unclosed '['",
    ),
    "glob leaving the workspace": (
        BASE + PROPOSE + "          globs: ['../*.md']\n",
        "policy.yaml:12: servers.notes.tools.create_note.propose.globs[0]:"
        " glob '../*.md' must not contain '.' or '..' folders (paths are normalised first)",
    ),
    "negative max_bytes": (
        BASE + PROPOSE + "          max_bytes: -5\n",
        "policy.yaml:12: servers.notes.tools.create_note.propose.max_bytes: must be greater than 0, got -5",
    ),
    "bad duration": (
        BASE.replace("servers:", "defaults:\n  expires_after: 7 days\nservers:", 1),
        "policy.yaml:3: defaults.expires_after: expected a duration such as '90s', '30m', '24h', '7d' or '2w',"
        " got a string '7 days'",
    ),
    "unquoted file_mode": (
        BASE + PROPOSE + "          file_mode: 0644\n",
        "policy.yaml:12: servers.notes.tools.create_note.propose.file_mode: expected an octal string such as"
        ' "0644", got a number (quote it, e.g. file_mode: "0644")',
    ),
    "setuid file_mode": (
        BASE + PROPOSE + "          file_mode: '4755'\n",
        "policy.yaml:12: servers.notes.tools.create_note.propose.file_mode:"
        " file mode 4755 sets setuid, setgid or sticky bits; use at most 0777",
    ),
    "env value not a string": (
        BASE.replace("    workspace:", "    env:\n      DEBUG: true\n    workspace:"),
        'policy.yaml:6: servers.notes.env.DEBUG: expected a string, got a boolean (quote it: "true")',
    ),
    "args item not a string": (
        BASE.replace("    workspace:", "    args: [--port, 8080]\n    workspace:"),
        'policy.yaml:5: servers.notes.args[1]: expected a string, got a number (quote it: "8080")',
    ),
    "args not a list": (
        BASE.replace("    workspace:", "    args: --verbose\n    workspace:"),
        "policy.yaml:5: servers.notes.args: expected a list such as [a, b], got a string '--verbose'",
    ),
    "duplicate key": (
        BASE + "      read_note: deny\n",
        "policy.yaml:8: servers.notes.tools: duplicate key 'read_note' (first at line 7)",
    ),
    "invalid YAML": (
        "version: 1\nservers:\n  notes:\n    command: python\n   workspace: x: y\n",
        "policy.yaml:5:4: not valid YAML: expected <block end>, but found '<block mapping start>'",
    ),
    "unknown YAML tag": (
        "version: 1\nservers: !servers {}\n",
        "policy.yaml:2:10: not valid YAML: could not determine a constructor for the tag '!servers'",
    ),
    "empty file": (
        "# nothing here yet\n",
        "policy.yaml: the file is empty"
        " (start with 'version: 1' and a 'servers:' mapping; see the example policy.yaml)",
    ),
    "top level is a list": (
        "- version: 1\n",
        "policy.yaml:1: expected a mapping at the top level (version:, servers:), got a list",
    ),
    "unknown server-level key": (
        BASE.replace("    tools:", "    tool:"),
        "policy.yaml:6: servers.notes: unknown key 'tool' (did you mean 'tools'?)",
    ),
    "unknown top-level key": (
        BASE.replace("servers:", "sever:"),
        "policy.yaml:2: unknown key 'sever' (did you mean 'servers'?)",
    ),
    "bad server name": (
        BASE.replace("  notes:", "  My Notes:"),
        "policy.yaml:3: servers.My Notes: server name 'My Notes' must start with a lowercase letter and use"
        " only a-z, 0-9, '_' and '-' (at most 32 characters)",
    ),
    "no servers": (
        "version: 1\nservers: {}\n",
        "policy.yaml:2: servers: needs at least one server",
    ),
    "server is not a mapping": (
        "version: 1\nservers:\n  notes:\n",
        "policy.yaml:3: servers.notes: expected a mapping (indented 'key: value' lines), got nothing (null)",
    ),
    "version missing": (
        BASE.replace("version: 1\n", ""),
        "policy.yaml:1: missing required key 'version' (add 'version: 1' at the top)",
    ),
    "version 2": (
        BASE.replace("version: 1", "version: 2"),
        "policy.yaml:1: version: unsupported policy version 2: this Gatekeeper reads 'version: 1'",
    ),
    "prefix clash": (
        BASE + "  other:\n    command: x\n    workspace: y\n    prefix: notes\n    tools:\n      a: allow\n",
        "policy.yaml:11: servers.other.prefix: prefix 'notes' is already used by server 'notes'"
        " (give each server its own 'prefix')",
    ),
    "prefix clash with another server's name": (
        BASE.replace("  notes:\n", "  other:\n    prefix: notes\n", 1)
        + "  notes:\n    command: x\n    workspace: y\n    tools:\n      a: allow\n",
        "policy.yaml:4: servers.other.prefix: prefix 'notes' is already used by server 'notes'"
        " (give each server its own 'prefix')",
    ),
    "duplicate key in a flow mapping": (
        BASE.replace("read_note: allow", "read_note: {propose: {}, propose: {}}"),
        "policy.yaml:7: servers.notes.tools.read_note: duplicate key 'propose' (first at line 7)",
    ),
    "reserved tool name": (
        BASE + f"      {RESERVED_TOOL}: allow\n",
        f"policy.yaml:8: servers.notes.tools.{RESERVED_TOOL}: the tool name '{RESERVED_TOOL}' is reserved by"
        " Gatekeeper (deny this tool, or add a second server so names get a prefix)",
    ),
    "wait_seconds out of range": (
        BASE + PROPOSE + "          wait_seconds: 601\n",
        "policy.yaml:12: servers.notes.tools.create_note.propose.wait_seconds: must be at most 600, got 601",
    ),
    "bad encoding": (
        BASE + PROPOSE + "          encoding: base-64\n",
        "policy.yaml:12: servers.notes.tools.create_note.propose.encoding: expected 'text' or 'base64',"
        " got a string 'base-64' (did you mean 'base64'?)",
    ),
    "misspelt propose key": (
        BASE + PROPOSE + "          glob: ['notes/*.md']\n",
        "policy.yaml:12: servers.notes.tools.create_note.propose: unknown key 'glob' (did you mean 'globs'?)",
    ),
    "empty command": (
        BASE.replace("command: python", "command: ''"),
        "policy.yaml:4: servers.notes.command: must not be empty",
    ),
    "bad review_url": (
        BASE.replace("servers:", "review_url: 127.0.0.1:8765\nservers:", 1),
        "policy.yaml:2: review_url: expected an http:// or https:// base URL such as"
        " 'http://localhost:8765', got '127.0.0.1:8765'",
    ),
}


@pytest.mark.parametrize("text, expected", list(BROKEN.values()), ids=list(BROKEN))
def test_broken_policy_gets_a_precise_message(tmp_path, monkeypatch, text, expected):
    assert error_of(tmp_path, monkeypatch, text) == expected


def test_several_problems_are_reported_together_in_line_order(tmp_path, monkeypatch):
    text = BASE.replace("read_note: allow", "read_note: alow").replace("    workspace:", "    env: {A: 1}\n    x:")
    lines = error_of(tmp_path, monkeypatch, text).splitlines()
    assert lines == [
        "policy.yaml:3: servers.notes: missing required key 'workspace'",
        'policy.yaml:5: servers.notes.env.A: expected a string, got a number (quote it: "1")',
        "policy.yaml:6: servers.notes: unknown key 'x'",
        "policy.yaml:8: servers.notes.tools.read_note: expected 'allow', 'deny' or a mapping with 'propose',"
        " got 'alow' (did you mean 'allow'?)",
    ]


def test_message_uses_the_file_name_as_given(tmp_path):
    path = write(tmp_path, BASE.replace("    command:", "    comand:"), "conf/gk.yaml")
    with pytest.raises(PolicyError) as info:
        load_policy(str(path))
    assert str(info.value).startswith(f"{path}:4: servers.notes: unknown key 'comand'")
    assert info.value.exit_code == 2


def test_names_that_collide_after_prefixing_are_an_error(tmp_path, monkeypatch):
    text = (
        "version: 1\nservers:\n"
        "  a:\n    command: x\n    workspace: w\n    tools:\n      _x: allow\n"
        "  a_:\n    command: x\n    workspace: w\n    tools:\n      x: allow\n"
    )
    assert error_of(tmp_path, monkeypatch, text) == (
        "policy.yaml:12: servers.a_.tools.x: host-facing name 'a___x' clashes with servers.a.tools._x"
    )


def test_yaml_aliases_cannot_loop_or_explode(tmp_path, monkeypatch):
    assert error_of(tmp_path, monkeypatch, "version: 1\nservers: &s [*s]\n") == (
        "policy.yaml:2: a YAML alias refers to itself"
    )
    bomb = "version: 1\nl0: &l0 [a, a, a, a, a, a, a, a, a, a]\n"
    for level in range(1, 8):
        bomb += f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 10) + "]\n"
    assert error_of(tmp_path, monkeypatch, bomb).startswith("policy.yaml: too many YAML nodes")


def test_merge_keys_may_be_overridden_without_a_duplicate_error(tmp_path):
    text = BASE.replace("    command: python\n", "    <<: {command: npx, workspace: elsewhere}\n    command: python\n")
    server = load_policy(write(tmp_path, text)).servers["notes"]
    assert server.command == "python"
    assert server.workspace == tmp_path / "ws"


def test_merge_keys_work_and_keep_line_numbers(tmp_path, monkeypatch):
    text = "version: 1\nservers:\n  notes:\n    <<: {command: x, workspace: w}\n    tools: {a: alow}\n"
    assert error_of(tmp_path, monkeypatch, text) == (
        "policy.yaml:5: servers.notes.tools.a: expected 'allow', 'deny' or a mapping with 'propose',"
        " got 'alow' (did you mean 'allow'?)"
    )


# ---------------------------------------------------------------- names and paths


def test_several_servers_get_prefixed_names(tmp_path):
    text = BASE + PROPOSE + "      drop: deny\n"
    text += "  files:\n    command: npx\n    workspace: shared\n    prefix: fs\n"
    text += "    tools:\n      write_file: allow\n"
    policy = load_policy(write(tmp_path, text))
    assert policy.exposed_tools() == {
        "notes__read_note": ("notes", "read_note"),
        "notes__create_note": ("notes", "create_note"),
        "fs__write_file": ("files", "write_file"),
    }
    rows = {(row["server"], row["tool"]): row for row in policy.describe()}
    assert rows[("notes", "drop")]["host_name"] is None
    assert rows[("files", "write_file")]["host_name"] == "fs__write_file"


def test_relative_paths_resolve_against_the_policy_folder(tmp_path, monkeypatch):
    text = BASE.replace("    workspace:", "    cwd: run\n    workspace:").replace("python", "./bin/server")
    policy_file = write(tmp_path / "conf", text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for name in (policy_file, "../conf/policy.yaml"):
        policy = load_policy(name)
        server = policy.servers["notes"]
        assert policy.source == policy_file
        assert server.workspace == tmp_path / "conf" / "ws"
        assert server.cwd == tmp_path / "conf" / "run"
        assert server.command == str(tmp_path / "conf" / "bin" / "server")


def test_cwd_defaults_to_the_policy_folder(tmp_path, monkeypatch):
    policy_file = write(tmp_path / "conf", BASE)
    empty = write(tmp_path / "conf", BASE.replace("    workspace:", "    cwd:\n    workspace:"), "empty.yaml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for name in (policy_file, "../conf/policy.yaml", empty):
        assert load_policy(name).servers["notes"].cwd == tmp_path / "conf"
    assert load_policy(policy_file).check_workspaces() == [
        f"{policy_file}:5: servers.notes.workspace: {tmp_path / 'conf' / 'ws'} does not exist"
        f" (create it: mkdir -p {tmp_path / 'conf' / 'ws'})"
    ]


def test_bare_command_names_are_left_for_path_lookup(tmp_path):
    policy = load_policy(write(tmp_path, BASE.replace("python", "npx")))
    assert policy.servers["notes"].command == "npx"


def test_check_workspaces_reports_missing_and_non_folders(tmp_path):
    path = write(tmp_path, BASE.replace("    workspace:", "    cwd: run\n    workspace:"))
    policy = load_policy(path)
    assert policy.check_workspaces() == [
        f"{path}:6: servers.notes.workspace: {tmp_path / 'ws'} does not exist (create it: mkdir -p {tmp_path / 'ws'})",
        f"{path}:5: servers.notes.cwd: {tmp_path / 'run'} does not exist (create it: mkdir -p {tmp_path / 'run'})",
    ]
    (tmp_path / "ws").write_text("a file")
    (tmp_path / "run").mkdir()
    assert policy.check_workspaces() == [f"{path}:6: servers.notes.workspace: {tmp_path / 'ws'} is not a directory"]
    (tmp_path / "ws").unlink()
    (tmp_path / "ws").mkdir()
    assert policy.check_workspaces() == []


# ---------------------------------------------------------------- finding the file


def test_resolution_order_env_then_cwd_then_home(tmp_path, monkeypatch):
    home, cwd, env_dir = tmp_path / "home", tmp_path / "cwd", tmp_path / "env"
    for folder, name in ((home, "h"), (cwd, "c"), (env_dir, "e")):
        write(folder, BASE.replace("  notes:", f"  {name}:"))
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("GATEKEEPER_POLICY", str(env_dir / "policy.yaml"))
    assert list(load_policy(home=home).servers) == ["e"]
    monkeypatch.delenv("GATEKEEPER_POLICY")
    assert list(load_policy(home=home).servers) == ["c"]
    assert load_policy(home=home).source == cwd / "policy.yaml"
    (cwd / "policy.yaml").unlink()
    assert list(load_policy(home=home).servers) == ["h"]
    assert list(load_policy(env_dir / "policy.yaml", home=home).servers) == ["e"]


def test_not_found_says_where_it_looked_and_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("GATEKEEPER_POLICY", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PolicyError) as info:
        load_policy(home=tmp_path / "home")
    assert str(info.value) == (
        f"no policy file found; looked at $GATEKEEPER_POLICY (not set), {tmp_path / 'policy.yaml'},"
        f" {tmp_path / 'home' / 'policy.yaml'} (pass --policy FILE or create policy.yaml;"
        " `gatekeeper policy check` validates it)"
    )


def test_missing_explicit_or_env_file_is_not_silently_skipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, BASE)
    with pytest.raises(PolicyError, match=r"^nope.yaml: no such policy file \(check the --policy path\)$"):
        load_policy("nope.yaml")
    monkeypatch.setenv("GATEKEEPER_POLICY", "gone.yaml")
    with pytest.raises(PolicyError, match=r"^\$GATEKEEPER_POLICY is gone.yaml, which is not a file"):
        load_policy()


# ---------------------------------------------------------------- globs, slugs, templates


@pytest.mark.parametrize(
    "pattern, path, expected",
    [
        ("inbox/**/*.md", "inbox/a.md", True),
        ("inbox/**/*.md", "inbox/x/y/a.md", True),
        ("inbox/**/*.md", "inbox.md", False),
        ("inbox/**/*.md", "other/a.md", False),
        ("inbox/**/*.md", "inbox/a.txt", False),
        ("**/*.md", "a.md", True),
        ("**/*.md", "x/y/a.md", True),
        ("notes/**", "notes/a/b", True),
        ("notes/**", "notes", False),
        ("*.md", "a.md", True),
        ("*.md", "x/a.md", False),
        ("?.md", "a.md", True),
        ("?.md", "ab.md", False),
        ("a?b", "a/b", False),
        ("[abc].md", "b.md", True),
        ("[!abc].md", "d.md", True),
        ("[!abc].md", "a.md", False),
        ("x[!a]y", "x/y", False),
        ("[]].md", "].md", True),
        ("a.md", "a.md", True),
        ("a.md", "aXmd", False),
        ("**", "any/thing/at/all.bin", True),
    ],
)
def test_glob_match(pattern, path, expected):
    assert glob_match(pattern, path) is expected


def test_glob_rejects_unclosed_class():
    with pytest.raises(ValueError, match="unclosed"):
        glob_match("a[b", "ab")


_component = st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=8)
_path = st.lists(_component, min_size=1, max_size=5).map("/".join)
_plain_component = st.text(st.characters(codec="utf-8", exclude_characters="/\x00*?[\\"), min_size=1, max_size=8)
_plain_path = st.lists(_plain_component, min_size=1, max_size=5).map("/".join)


@given(_path)
def test_double_star_matches_every_path(path):
    assert glob_match("**", path)


@given(_plain_path, _path)
def test_pattern_without_wildcards_matches_only_itself(pattern, other):
    assert glob_match(pattern, pattern)
    assert glob_match(pattern, other) is (pattern == other)


@given(_plain_path)
def test_star_never_crosses_a_folder(path):
    assert glob_match("*", path) is ("/" not in path)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("My First Note", "my-first-note"),
        ("  Hello,   World!! ", "hello-world"),
        ("Café déjà vu", "cafe-deja-vu"),
        ("../../etc/passwd", "etc-passwd"),
        ("", "untitled"),
        ("!!!", "untitled"),
        ("日本語", "untitled"),
        (42, "42"),
        ("a" * 100, "a" * 80),
        ("a" * 79 + " b", "a" * 79),
    ],
)
def test_slug(text, expected):
    assert slug(text) == expected


def test_render_template_uses_args_and_slug():
    assert render_template("notes/{{ args.title | slug }}.md", {"title": "Q3 Plan!"}) == "notes/q3-plan.md"


def test_render_template_missing_argument_is_a_caller_error():
    with pytest.raises(TemplateRenderError, match="has no attribute 'title'") as info:
        render_template("{{ args.title }}", {})
    assert isinstance(info.value, InvalidInput)


def test_render_template_sandbox_escape_is_refused():
    with pytest.raises(TemplateRenderError, match="unsafe"):
        render_template("{{ ''.__class__.__mro__ }}", {})
    with pytest.raises(TemplateRenderError, match="unsafe"):
        render_template("{{ args.title.__class__.__base__.__subclasses__() }}", {"title": "x"})


def test_render_template_syntax_error_is_a_policy_error():
    with pytest.raises(PolicyError, match="is not valid"):
        render_template("{{ args.title", {"title": "x"})


def test_policy_models_are_frozen(tmp_path):
    policy = load_policy(write(tmp_path, BASE))
    assert isinstance(policy, Policy)
    with pytest.raises(ValueError, match="frozen"):
        policy.servers["notes"].command = "sh"  # type: ignore[misc]


@pytest.mark.parametrize(
    "rule, name, allowed",
    [
        ("server", "notes", True),
        ("server", "a" + "b" * 31, True),
        ("server", "a" + "b" * 32, False),
        ("server", "my.notes", False),
        ("server", "Notes", False),
        ("server", "1notes", False),
        ("prefix", "p" * 60, True),  # a prefix never had a length limit of its own
        ("prefix", "p.x", False),
        ("reviewer", "jane.doe", True),
        ("reviewer", "a" + "b" * 32, False),
        ("reviewer", "jane doe", False),
        ("reviewer", "jane\n", False),
    ],
)
def test_one_name_grammar_keeps_what_each_kind_allowed(rule: str, name: str, allowed: bool) -> None:
    from gatekeeper import names

    kind = {"server": names.SERVER, "prefix": names.PREFIX, "reviewer": names.REVIEWER}[rule]
    assert kind.allows(name) is allowed


def test_a_bad_prefix_says_what_a_prefix_may_hold(tmp_path):
    text = BASE.replace("    command:", "    prefix: my.notes\n    command:", 1)
    with pytest.raises(PolicyError) as caught:
        load_policy(write(tmp_path, text))
    assert "prefix 'my.notes' must start with a lowercase letter and use only a-z, 0-9, '_' and '-'" in str(
        caught.value
    )


def test_a_policy_built_from_a_document_names_its_file_and_lines(tmp_path):
    """``Policy.from_document`` is the public way to say where a policy came from (the loader uses it)."""
    data = yaml.safe_load(BASE)
    source = tmp_path / "p.yaml"
    policy = Policy.from_document(
        data, source=source, display="conf/p.yaml", lines={("servers", "notes", "workspace"): 5}
    )
    assert policy.source == source and policy.base_dir == source.parent
    assert policy.servers["notes"].workspace == tmp_path / "ws"
    assert policy.where(("servers", "notes", "workspace")) == "conf/p.yaml:5: servers.notes.workspace"
    assert policy.check_workspaces()[0].startswith("conf/p.yaml:5: servers.notes.workspace: ")
    assert policy.digest == load_policy(write(tmp_path, BASE)).digest  # where it came from is not policy


# ---------------------------------------------------------------- when: a rule limited to argument values

WHEN = """\
      obsidian_edit_note:
        propose:
          mode: append
          path: {arg: path}
          content: {arg: content}
"""


def test_when_limits_a_rule_to_argument_values(tmp_path):
    policy = load_policy(write(tmp_path, BASE + WHEN + "          when: {operation: append, vault: notes}\n"))
    rule = policy.servers["notes"].tools["obsidian_edit_note"].propose
    assert rule.when == {"operation": "append", "vault": "notes"}
    row = {r["tool"]: r for r in policy.describe()}["obsidian_edit_note"]
    assert row["mode"] == "append" and row["when"] == {"operation": "append", "vault": "notes"}


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("{}", "'when' needs at least one argument and its value"),
        ("{content: x}", "'when' cannot test 'content': that argument carries the path or the content"),
        ("{path: x}", "'when' cannot test 'path'"),
        ("{operation: [append]}", "operation"),
    ],
)
def test_bad_when_is_a_policy_error(tmp_path, monkeypatch, when, expected):
    assert expected in error_of(tmp_path, monkeypatch, BASE + WHEN + f"          when: {when}\n")


# ---------------------------------------------------------------- the README's and examples/ policies


def _readme_policies() -> list[str]:
    import re

    return re.findall(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), re.S)


@pytest.mark.parametrize("number", range(6))
def test_every_policy_in_the_readme_loads(tmp_path, number):
    blocks = _readme_policies()
    assert len(blocks) == 6
    policy = load_policy(write(tmp_path, blocks[number]))
    assert policy.describe()


def test_the_example_policies_load_with_the_modes_they_say(tmp_path):
    modes = {}
    for name in ("filesystem.yaml", "obsidian.yaml", "http-vault.yaml"):
        for row in load_policy(REPO / "examples" / name).describe():
            modes[row["tool"]] = (row["mode"], row["when"])
    assert modes["write_file"] == ("replace", None)
    assert modes["edit_file"] == ("edit", None)
    assert modes["obsidian_edit_note"] == ("append", {"operation": "append", "vault": "notes"})
    assert modes["read_text_file"] == (None, None)
    assert modes["create_note"] == ("create", None) and modes["read_note"] == (None, None)
    vault = load_policy(REPO / "examples" / "http-vault.yaml").servers["vault"]
    assert (vault.url, vault.command, vault.headers["Authorization"].env) == (
        "http://127.0.0.1:3000/mcp",
        None,
        "VAULT_TOKEN",
    )
