"""Read policy.yaml into a ``Policy``, turning every problem into ``file:line: key.path: what``.

PyYAML forgets where values came from and pydantic reports tuples of keys, so this module
records the line of every key path while parsing and rewrites each validation error as a
sentence at that line. It also decides which file is the policy.
"""

from __future__ import annotations

import os
import re
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ValidationError

from gatekeeper.errors import PolicyError
from gatekeeper.policy.launch import find_policy as _find
from gatekeeper.policy.messages import close_matches, describe_value, line_of, locate, suggest
from gatekeeper.policy.model import Policy

__all__ = ["load_policy"]

_MAX_NODES = 100_000  # YAML aliases can expand exponentially ("billion laughs")
Lines = dict[tuple[Any, ...], int]  # key path -> line number, for messages
Nodes = dict[tuple[Any, ...], yaml.Node]


class _Loader(yaml.SafeLoader):
    """SafeLoader that records the line of every key path and refuses duplicate keys.

    PyYAML silently keeps the last of two equal keys, which would let a stray ``allow`` hide
    an earlier ``deny``; here that is an error.
    """

    _MERGE = "tag:yaml.org,2002:merge"

    def record_positions(self, root: yaml.Node, lines: Lines, nodes: Nodes, display: str) -> None:
        """Fill ``lines`` (key path -> 1-based line) and ``nodes`` (key path -> value node)."""
        self._lines, self._nodes, self._display, self._budget = lines, nodes, display, _MAX_NODES
        self._walk(root, (), frozenset(), merged=False)

    def _walk(self, node: yaml.Node, path: tuple[Any, ...], stack: frozenset[int], merged: bool) -> None:
        self._budget -= 1
        if self._budget < 0:
            raise PolicyError(f"{self._display}: too many YAML nodes (aliases expand to more than {_MAX_NODES})")
        if id(node) in stack:
            raise PolicyError(f"{self._display}:{node.start_mark.line + 1}: a YAML alias refers to itself")
        stack = stack | {id(node)}
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._record((*path, i), item.start_mark.line + 1, item, weak=merged)
                self._walk(item, (*path, i), stack, merged)
        elif isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            merges = []
            for key_node, value_node in node.value:
                if key_node.tag == self._MERGE:
                    merges.append(value_node)
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:
                    raise PolicyError(f"{locate(self._display, line, path)}: keys must be plain names") from None
                if first is not None:
                    raise PolicyError(
                        f"{locate(self._display, line, path)}: duplicate key {key!r} (first at line {first})"
                    )
                seen[key] = line
                self._record((*path, key), line, value_node, weak=merged)
                self._walk(value_node, (*path, key), stack, merged)
            # '<<: *base' keys count only where the mapping does not set them itself.
            for value_node in merges:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    self._walk(source, path, stack, merged=True)

    def _record(self, path: tuple[Any, ...], line: int, node: yaml.Node, weak: bool) -> None:
        if weak:
            self._lines.setdefault(path, line)
            self._nodes.setdefault(path, node)
        else:
            self._lines[path], self._nodes[path] = line, node


def _allowed_keys(path: tuple[Any, ...]) -> list[str]:
    """The keys the model at ``path`` accepts, for 'did you mean' suggestions."""
    tp: Any = Policy
    for part in path:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return []
            tp = field.annotation
        elif typing.get_origin(tp) in (dict, tuple):
            tp = typing.get_args(tp)[-1 if typing.get_origin(tp) is dict else 0]
        else:
            return []
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(getattr(tp, "yaml_keys", None) or tp.model_fields)
    return []


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            tp = next(arg for arg in typing.get_args(tp) if arg is not type(None))
        else:
            return tp


def _explain(error: Mapping[str, Any], path: tuple[Any, ...], node: yaml.Node | None) -> tuple[tuple[Any, ...], str]:
    """Rewrite one pydantic error as (key path to show, sentence)."""
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "policy":
        return path, ctx["message"]
    if kind == "missing":
        extra = " (add 'version: 1' at the top)" if path == ("version",) else ""
        return path[:-1], f"missing required key {path[-1]!r}{extra}"
    if kind == "extra_forbidden":
        return path[:-1], f"unknown key {path[-1]!r}{suggest(path[-1], _allowed_keys(path[:-1]))}"
    if kind == "string_type":
        text = f"expected a string, got {describe_value(value)}"
        if isinstance(value, bool | int | float):
            raw = node.value if isinstance(node, yaml.ScalarNode) else str(value)
            text += f' (quote it: "{raw}")'
        elif value is None:
            text += ' (write "" for an empty string)'
        return path, text
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return path, f"expected a whole number, got {describe_value(value)}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return path, f"expected a mapping (indented 'key: value' lines), got {describe_value(value)}"
    if kind in ("tuple_type", "list_type"):
        return path, f"expected a list such as [a, b], got {describe_value(value)}"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", ctx.get("expected", ""))
        return path, f"expected {ctx.get('expected')}, got {describe_value(value)}{suggest(value, choices)}"
    if kind == "too_short":
        if path == ("servers",):
            return path, "needs at least one server"
        if ctx.get("field_type") == "Value" or isinstance(value, str):
            return path, "must not be empty"
        return path, f"needs at least {ctx.get('min_length')} item(s)"
    if kind == "string_too_short":
        return path, "must not be empty"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        words = {
            "greater_than": "greater than",
            "greater_than_equal": "at least",
            "less_than": "less than",
            "less_than_equal": "at most",
        }
        bound = next(iter(ctx.values()), "?")
        return path, f"must be {words[kind]} {bound}, got {value!r}"
    message = str(error.get("msg", "is not valid"))
    message = message.removeprefix("Value error, ")
    return path, message[:1].lower() + message[1:]


def _messages(exc: ValidationError, display: str, lines: Lines, nodes: Nodes) -> Iterator[tuple[int, str]]:
    errors = [
        (error, tuple(part for part in error["loc"] if part != "[key]")) for error in exc.errors(include_url=False)
    ]
    # "unknown key 'comand' (did you mean 'command'?)" already covers "missing 'command'".
    meant: set[tuple[Any, ...]] = set()
    for error, loc in errors:
        if error["type"] == "extra_forbidden":
            meant.update((*loc[:-1], key) for key in close_matches(loc[-1], _allowed_keys(loc[:-1])))
    for error, loc in errors:
        if error["type"] == "missing" and loc in meant:
            continue
        shown, text = _explain(error, loc, nodes.get(loc))
        # An unknown key is reported on its own line, under its parent's path.
        line = lines.get(loc) if error["type"] == "extra_forbidden" else None
        line = line or line_of(lines, shown)
        yield line, f"{locate(display, line, shown)}: {text}"


def _parse(text: str, source: Path, display: str) -> Policy:
    loader = _Loader(text)
    lines: Lines = {}
    nodes: Nodes = {}
    try:
        root = loader.get_single_node()
        if root is None:
            raise PolicyError(
                f"{display}: the file is empty",
                "start with 'version: 1' and a 'servers:' mapping; see the example policy.yaml",
            )
        lines[()] = root.start_mark.line + 1
        if not isinstance(root, yaml.MappingNode):
            kind = "a list" if isinstance(root, yaml.SequenceNode) else f"a single value {root.value!r}"
            raise PolicyError(
                f"{display}:{lines[()]}: expected a mapping at the top level (version:, servers:), got {kind}"
            )
        loader.record_positions(root, lines, nodes, display)
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{display}:{mark.line + 1}:{mark.column + 1}" if mark else display
        problem = exc.problem or exc.context or "unreadable"
        if exc.context and problem.startswith("but "):  # "expected a single document ..., but found ..."
            problem = f"{exc.context}, {problem}"
        raise PolicyError(f"{where}: not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"{display}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    try:
        policy = Policy.from_document(data, source=source, display=display, lines=lines)
    except ValidationError as exc:
        found = sorted(set(_messages(exc, display, lines, nodes)))
        shown = [message for _, message in found[:10]]
        if len(found) > 10:
            shown.append(f"... and {len(found) - 10} more")
        raise PolicyError("\n".join(shown)) from None
    policy.exposed_tools()  # name clashes are load errors, not surprises at the first tools/list
    return policy


def load_policy(path: str | os.PathLike[str] | None = None, *, home: Path | None = None) -> Policy:
    """Find, read and validate the policy; every problem is a ``PolicyError`` naming file and line."""
    file, display = _find(path, home)
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{display}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise PolicyError(f"{display}: cannot read: {exc.strerror or exc}") from None
    return _parse(text, Path(os.path.abspath(file)), display)
