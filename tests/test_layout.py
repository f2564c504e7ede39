"""The shape of the code, checked so it stays readable: small modules, short functions, and no
reaching into another module's private names. (SQL stays in gatekeeper/store/: see
test_store.py::test_no_sql_outside_the_store; event kinds in events.py: test_event_kinds.py.)"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import gatekeeper

PACKAGE = Path(gatekeeper.__file__).resolve().parent
BENCH = PACKAGE.parent / "bench"
WARN_MODULE_LINES = 400  # past this a module is named in a warning: is it still one concept?
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted([*PACKAGE.rglob("*.py"), *BENCH.glob("*.py")])


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


@pytest.mark.filterwarnings("always::UserWarning")  # a warning names the module; only past 600 fails
def test_no_module_over_600_lines() -> None:
    sizes = {_name(p): len(p.read_text().splitlines()) for p in _sources()}
    for name, n in sorted(sizes.items()):
        if WARN_MODULE_LINES < n <= MAX_MODULE_LINES:
            warnings.warn(f"{name} has {n} lines (over {WARN_MODULE_LINES}): one concept, or two?", stacklevel=1)
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


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


PROXY = PACKAGE / "proxy"
# What each part of the proxy may import inside the proxy (its own part always): the floors a host
# line climbs through. The top (routing, the session, the domain) may import any of them.
PROXY_FLOORS = {
    "protocol": set(),
    "host": {"protocol"},
    "servers": {"protocol"},
    "fast": {"protocol", "host", "servers"},
}
# Inside servers/: a stdio child and a url server share only the face, the carrier word and early start.
SERVERS_BASE = {"servers.carrier", "servers.early", "servers.face"}


def _proxy_imports(root: Path = PROXY) -> dict[str, set[str]]:
    """Each proxy module (``host.parse``) to the proxy modules it imports anywhere in it, typing-only too."""
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in root.rglob("*.py")
    }
    modules = {m.removesuffix("__init__").rstrip("."): p for m, p in modules.items()}
    arrows: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            else:
                continue
            for target in targets:
                inner = target.removeprefix("gatekeeper.proxy.")
                if target.startswith("gatekeeper.proxy.") and inner in modules and inner != name:
                    arrows[name].add(inner)
                    break  # ``from a.b import c``: the module c if it is one, else a.b
    return arrows


def _proxy_circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected group of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in arrows.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(arrows):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_inside_the_proxy() -> None:
    assert _proxy_circles(_proxy_imports()) == []


def test_the_proxy_circle_check_can_fail() -> None:
    assert _proxy_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _floor_breaches(arrows: dict[str, set[str]]) -> list[str]:
    breaches = []
    for source, targets in arrows.items():
        part = source.split(".")[0]
        for target in targets:
            other = target.split(".")[0]
            if part in PROXY_FLOORS and other != part and other not in PROXY_FLOORS[part]:
                breaches.append(f"{source} -> {target}")
            sub, other_sub = source.split(".")[:2], target.split(".")[:2]
            if (
                part == other == "servers"
                and sub[1] in ("stdio", "url")
                and other_sub != sub
                and target not in SERVERS_BASE
            ):
                breaches.append(f"{source} -> {target}")
            if source in SERVERS_BASE and target.startswith("servers.") and target not in SERVERS_BASE:
                breaches.append(f"{source} -> {target}")
    return sorted(breaches)


def test_proxy_imports_run_only_down_its_floors() -> None:
    """protocol imports nothing of the proxy; host/ and servers/ only protocol (never each other);
    fast/ those three; inside servers/ a stdio child and a url server only the shared base."""
    assert _floor_breaches(_proxy_imports()) == []


def test_the_proxy_floor_check_can_fail() -> None:
    arrows = {
        "protocol.rpc": {"host.parse"},
        "host.parse": {"servers.face"},
        "servers.url.carrier": {"servers.stdio.rpc"},
    }
    assert _floor_breaches(arrows) == [
        "host.parse -> servers.face",
        "protocol.rpc -> host.parse",
        "servers.url.carrier -> servers.stdio.rpc",
    ]
