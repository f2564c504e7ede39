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


# -- import arrows between gatekeeper's packages -----------------------------------------------
# Each top-level package or module of gatekeeper/ stands on a floor; an import may go down or
# sideways (without a circle), never up (DESIGN.md: cli -> proxy/review/commit/audit -> store -> policy).
FLOORS: dict[str, int] = {
    **dict.fromkeys(("errors", "canonical", "humane", "names", "origins", "resources"), 0),  # words
    "policy": 1,
    **dict.fromkeys(("content", "trust", "workspace"), 2),
    "store": 3,
    "home": 4,
    **dict.fromkeys(("commit", "audit", "proxy", "review", "up"), 5),
    **dict.fromkeys(("cli", "demo", "__main__", "__init__"), 6),
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str) -> str:
    """The longest prefix of ``name`` that is a module of gatekeeper (``from a.b import c``: a.b.c or a.b)."""
    parts = name.split(".")
    while parts:
        base = PACKAGE.parent.joinpath(*parts)
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return name


def _imports(tree: ast.Module) -> set[str]:
    """Every gatekeeper module ``tree`` imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {_resolve(n) for n in names if n.startswith("gatekeeper.")}


def module_arrows() -> set[tuple[str, str]]:
    return {
        (m, target)
        for p in PACKAGE.rglob("*.py")
        for target in _imports(ast.parse(p.read_text()))
        if target != (m := _module(p))
    }


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def package_arrows(arrows: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(_unit(a), _unit(b)) for a, b in arrows if _unit(a) != _unit(b) and _unit(b) != "__init__"}


def circles(arrows: set[tuple[str, str]]) -> list[set[str]]:
    """The strongly connected groups of more than one node: each holds an import circle."""
    reach: dict[str, set[str]] = {}
    for a, b in arrows:
        reach.setdefault(a, set()).add(b)
        reach.setdefault(b, set())
    changed = True
    while changed:  # transitive closure: a few dozen nodes
        changed = False
        for seen in reach.values():
            more = set().union(*(reach[n] for n in seen)) - seen
            if more:
                seen |= more
                changed = True
    groups = {frozenset({n} | {m for m in reach[n] if n in reach[m]}) for n in reach}
    return sorted((set(g) for g in groups if len(g) > 1), key=sorted)


def test_no_import_circle_between_gatekeepers_packages() -> None:
    arrows = package_arrows(module_arrows())
    assert circles(arrows) == []
    assert len(arrows) < 80  # 107 before workspace/, trust/, content/, up/ and commit/revert.py (74 after)


def test_every_package_has_a_floor_and_no_import_runs_up() -> None:
    arrows = package_arrows(module_arrows())
    units = {u for arrow in arrows for u in arrow} | {_unit(_module(p)) for p in PACKAGE.glob("*.py")}
    assert units - set(FLOORS) == set(), "place each new package or top-level module on a floor"
    up = sorted(f"{a} -> {b}" for a, b in arrows if FLOORS[a] < FLOORS[b])
    assert up == []


def test_workspace_trust_and_content_import_no_process_package() -> None:
    processes = {"proxy", "review", "commit", "cli", "audit", "up", "home", "store"}
    arrows = package_arrows(module_arrows())
    assert sorted(f"{a} -> {b}" for a, b in arrows if a in {"workspace", "trust", "content"} and b in processes) == []
    assert {b for a, b in arrows if a == "workspace"} == set()  # stdlib only: no fault injection in here


def test_only_the_test_harness_loads_the_planted_bugs() -> None:
    """The committer's modules know the seam (switches.py) only; faults.py alone installs planted.py,
    and only the CLI's edge (on a GATEKEEPER_* test variable) loads faults.py."""
    arrows = module_arrows()
    assert {a for a, b in arrows if b == "gatekeeper.commit.planted"} == {"gatekeeper.commit.faults"}
    assert {a for a, b in arrows if b == "gatekeeper.commit.faults"} == {"gatekeeper.cli.commit_cmd"}
    assert {b for a, b in arrows if a == "gatekeeper.commit.switches"} == set()


def test_the_circle_check_can_fail() -> None:
    assert circles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "d")}) == [{"a", "b", "c"}]
    assert circles({("a", "b"), ("b", "c")}) == []
