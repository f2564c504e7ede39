"""The shape of the code, checked so it stays readable: small modules, short functions, and no
reaching into another module's private names. (SQL stays in gatekeeper/store/: see
test_store.py::test_no_sql_outside_the_store; event kinds in events.py: test_event_kinds.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import gatekeeper

PACKAGE = Path(gatekeeper.__file__).resolve().parent
BENCH = PACKAGE.parent / "bench"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted([*PACKAGE.rglob("*.py"), *BENCH.glob("*.py")])


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_no_module_over_400_lines() -> None:
    long = {_name(p): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_over_60_lines() -> None:
    long = {
        f"{_name(p)}::{node.name}": length
        for p in _sources()
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert long == {}


def _private_uses(tree: ast.Module) -> list[str]:
    """``from gatekeeper.x import _y`` and ``module._y`` where ``module`` was imported: each a
    reach into another module's insides. ``self._y`` and ``cls._y`` are a class's own business."""
    modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gatekeeper"):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            modules |= {a.asname or a.name for a in node.names if not a.name.startswith("_")}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.value.id not in {"os", "sys"}  # os._exit is the standard library's public API
        ):
            found.append(ast.unparse(node))
    return found


def test_no_private_name_is_used_across_modules() -> None:
    found = {_name(p): uses for p in _sources() if (uses := _private_uses(ast.parse(p.read_text())))}
    assert found == {}


def test_the_private_name_check_can_fail() -> None:
    tree = ast.parse("from gatekeeper.x import _hidden\nfrom gatekeeper import store\nstore._append(1)\n")
    assert _private_uses(tree) == ["import _hidden", "store._append"]
