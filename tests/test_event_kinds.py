"""Audit event kinds are spelled once, in gatekeeper/store/events.py.

A kind typed as a string elsewhere is a misspelling waiting to happen (the database takes any
text) and hides which kinds exist. This scan finds registered kinds written as literals in the
places a kind goes: an argument of the calls that record events, a comparison with a kind, a
``kind`` assignment or keyword, and quoted inside SQL text. The same words used for other things
(the ``decision`` table, a ``detail["decision"]`` key, a ``by="init"`` label) are not kinds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gatekeeper.store import events
from gatekeeper.store.events import KINDS

PACKAGE = Path(events.__file__).resolve().parent.parent
REGISTRY = Path(events.__file__).resolve()
# Calls whose arguments include an event kind: Store.append_event / _append, the proxy's
# Audit.event / refused, Refusals.record, a Downstream's on_event callback.
KIND_TAKERS = {"append_event", "_append", "event", "refused", "record", "on_event", "_on_event"}
SQL_KIND = re.compile(r"'([a-z_]+)'")


def _name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _kind_constants(node: ast.AST) -> list[ast.Constant]:
    """The registered kinds a node is, or lists directly (a tuple / list / set of them)."""
    if isinstance(node, ast.Constant) and node.value in KINDS:
        return [node]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e for e in node.elts if isinstance(e, ast.Constant) and e.value in KINDS]
    return []


def kind_literals(source: str) -> list[tuple[int, str]]:
    """(line, kind) of every event kind written as a literal in this Python source."""
    found: list[ast.Constant] = []
    sql: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            if _name_of(node.func) in KIND_TAKERS:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    found += _kind_constants(arg)
            else:
                found += [c for k in node.keywords if k.arg and "kind" in k.arg for c in _kind_constants(k.value)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any("kind" in ast.unparse(side) for side in sides):
                found += [c for side in sides for c in _kind_constants(side)]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any("kind" in ast.unparse(t).lower() for t in targets):
                found += _kind_constants(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "kind":
                    found += _kind_constants(value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value:
            sql += [(node.lineno, m) for m in SQL_KIND.findall(node.value) if m in KINDS]
    return sorted({(c.lineno, str(c.value)) for c in found} | set(sql))


def test_no_event_kind_literal_outside_the_registry() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {kind!r} (use gatekeeper.store.events)"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.resolve() != REGISTRY
        for line, kind in kind_literals(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_registry_is_every_kind_once() -> None:
    names = {name: value for name, value in vars(events).items() if name.isupper() and isinstance(value, str)}
    assert set(names.values()) == KINDS
    assert len(names) == len(KINDS), "two names for one kind"
    assert all(re.fullmatch(r"[a-z_]+", kind) for kind in KINDS)


@pytest.mark.parametrize(
    "source",
    [
        'store.append_event("login_link_issued", actor, {})',
        'self.store._append(conn, "login", actor, None, {})',
        'await self.audit.refused("tool_denied", payload)',
        'await self.event(kind="proxy_started", payload={})',
        'refusals.record("request_refused", "review", {})',
        'if kind == "decision":\n    pass',
        'if row["kind"] in ("commit_intent", "commit_outcome"):\n    pass',
        'KIND = "server_started"',
        'Event(kind="logout")',
        'payload = {"kind": "init"}',
        "conn.execute(\"SELECT 1 FROM audit_event WHERE kind = 'commit_intent'\")",
    ],
)
def test_the_scan_finds_a_kind_literal(source: str) -> None:
    assert kind_literals(source) != []


@pytest.mark.parametrize(
    "source",
    [
        'conn.insert("decision", {"verdict": "approved"})',  # the decision table
        'decision = detail["decision"]',  # a key of a proposal's detail
        'setup_home(home, actor, by="init")',  # which command set the home up
        'require_unsafe(request, token, "logout")',  # the action a refusal names
        'store.append_event(ev.LOGIN, actor, {"how": "password"})',
        "if kind == ev.DECISION:\n    pass",
        'help_text = "Only events of this kind (init, decision)"',
    ],
)
def test_the_scan_leaves_other_uses_of_the_same_words(source: str) -> None:
    assert kind_literals(source) == []
