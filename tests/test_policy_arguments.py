"""``policy check`` checks the argument names a rule reads against the tool's listed input schema
(issue 24 item 10): ``{{ args.titel }}`` for a tool that takes ``title`` is an error at check time,
not at the agent's first call. The servers are real (the demo notes server, started and listed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gatekeeper.cli import cli
from gatekeeper.home import Home
from gatekeeper.policy.arguments import template_arguments

NOTES = "[-m, gatekeeper.demo.notes_server, ./ws]"


def write(tmp_path: Path, rule: str, *, server: str = f"command: {sys.executable}\n    args: {NOTES}") -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"version: 1\nservers:\n  notes:\n    {server}\n    workspace: ws\n    tools:\n"
        f"      read_note: allow\n      create_note:\n        propose: {rule}\n"
    )
    return policy


def check(policy: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["policy", "check", "--policy", str(policy), *extra])
    return result.exit_code, result.stdout, result.stderr


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    "source, names",
    [
        ("notes/{{ args.title | slug }}.md", ["title"]),
        ("{{ args['tags'][0] }}/{{ args.get('when', 'today') }}-{{ args.meta.date }}", ["tags", "when", "meta"]),
        ("{% if args.draft is defined %}drafts{% else %}notes{% endif %}/{{ args.title }}", ["draft", "title"]),
        ("fixed.md", []),
    ],
)
def test_the_names_a_template_reads(source: str, names: list[str]) -> None:
    assert template_arguments(source) == names


def test_a_misspelt_template_argument_is_an_error_with_a_suggestion(home: Home, tmp_path: Path) -> None:
    policy = write(tmp_path, "{path: {template: 'notes/{{ args.titel | slug }}.md'}, content: {arg: body}}")
    code, out, err = check(policy)
    assert code == 1 and "create_note" in out  # the rules are still shown
    line = next(n for n, text in enumerate(policy.read_text().splitlines(), 1) if "titel" in text)
    assert (
        f"Error: {policy}:{line}: servers.notes.tools.create_note.propose.path.template: the rule for "
        "notes.create_note reads argument 'titel', which the tool does not take (did you mean 'title'?); "
        "its arguments: title, body"
    ) in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "rule, name, fix",
    [
        ("{path: {template: 'notes/{{ args.title }}.md'}, content: {arg: bdy}}", "bdy", "body"),
        ("{path: {arg: titel}, content: {arg: body}}", "titel", "title"),
        ("{path: {arg: title}, content: {template: '{{ args[\"boddy\"] }}'}}", "boddy", "body"),
        ("{path: {arg: title}, content: {arg: body}, when: {titl: x}}", "titl", "title"),
    ],
)
def test_every_argument_a_rule_reads_is_checked(home: Home, tmp_path: Path, rule: str, name: str, fix: str) -> None:
    code, _, err = check(write(tmp_path, rule))
    assert code == 1 and f"reads argument {name!r}, which the tool does not take (did you mean {fix!r}?)" in err


def test_names_the_tool_takes_pass(home: Home, tmp_path: Path) -> None:
    rule = "{path: {template: 'notes/{{ args.title | slug }}.md'}, content: {arg: body}}"
    code, _, err = check(write(tmp_path, rule))
    assert code == 0 and err == "", err


def test_a_server_that_cannot_be_listed_is_said_not_passed(home: Home, tmp_path: Path) -> None:
    rule = "{path: {template: 'notes/{{ args.titel }}.md'}, content: {arg: body}}"
    quits = f"command: {sys.executable}\n    args: [-c, 'import sys; sys.exit(3)']"
    code, _, err = check(write(tmp_path, rule, server=quits))
    assert code == 0, err
    said = f"Warning: {tmp_path / 'policy.yaml'}:3: servers.notes: could not list the tools of server 'notes', so the"
    assert said in err and "were not checked: downstream server 'notes' is not available" in err
    remote = "url: http://127.0.0.1:9/mcp"  # nothing listens on the discard port
    code, _, err = check(write(tmp_path, rule, server=remote))
    assert code == 0 and "could not list the tools of server 'notes'" in flat(err), err
    code, _, err = check(write(tmp_path, rule), "--no-start")  # asked not to start: not checked, as said
    assert code == 0 and err == ""


def test_a_rule_for_a_tool_the_server_does_not_list_is_a_warning(home: Home, tmp_path: Path) -> None:
    policy = write(tmp_path, "{path: {arg: title}, content: {arg: body}}")
    policy.write_text(policy.read_text().replace("read_note: allow", "raed_note: allow"))
    code, _, err = check(policy)
    assert code == 0
    assert "servers.notes.tools.raed_note: server 'notes' lists no tool 'raed_note' (did you mean 'read_note'?)" in err
