"""Load and validate policy.yaml: which servers run, and what each of their tools may do.

The policy is the one file a person edits by hand, so every mistake must come back as one
line that names the file, the line, the key path and, where it can, the key they meant.
Everything else (the proxy, the committer, ``gatekeeper policy check``) trusts the frozen
``Policy`` this module returns and never re-reads the YAML itself.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
import types
import typing
import unicodedata
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NoReturn

import yaml
from jinja2 import StrictUndefined, Template, TemplateError, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gatekeeper.errors import InvalidInput, PolicyError

__all__ = [
    "RESERVED_TOOL",
    "Defaults",
    "Policy",
    "Propose",
    "Server",
    "Source",
    "TemplateRenderError",
    "ToolRule",
    "glob_match",
    "load_policy",
    "render_template",
    "slug",
]

RESERVED_TOOL = "gatekeeper_proposal_status"
DEFAULT_REVIEW_URL = "http://127.0.0.1:8765"
_SERVER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_PREFIX = re.compile(r"[a-z][a-z0-9_-]*")
_DURATION = re.compile(r"([0-9]+)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MAX_DURATION = timedelta(days=3650)  # beyond this timedelta arithmetic is a bug waiting to happen
_MAX_BYTES_CAP = 100 * 1024 * 1024  # a reviewer has to read the content in a browser
_MAX_NODES = 100_000  # YAML aliases can expand exponentially ("billion laughs")


class TemplateRenderError(InvalidInput):
    """A policy template could not be rendered from a tool call's arguments.

    The arguments come from the model, so this is the caller's problem to fix (a tool error),
    not a policy problem; a template that does not even compile is a ``PolicyError``.
    """


def _fail(message: str) -> NoReturn:
    """Raise a validation error whose text reaches the user as written (no pydantic prefix)."""
    raise PydanticCustomError("policy", "{message}", {"message": message})


def _close(word: object, choices: typing.Iterable[str]) -> list[str]:
    return difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)


def _suggest(word: object, choices: typing.Iterable[str]) -> str:
    close = _close(word, choices)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _kind(value: object) -> str:
    """Describe a YAML value's type the way a person reading the file would."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string {shown!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


# ---------------------------------------------------------------- slugs and templates


def slug(value: object, max_length: int = 80) -> str:
    """Turn free text into a safe file-name part: lowercase ASCII, '-' between words."""
    text = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return text[:max_length].rstrip("-") or "untitled"


_JINJA = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_JINJA.filters["slug"] = slug


@functools.lru_cache(maxsize=256)
def _compile(source: str) -> Template:
    return _JINJA.from_string(source)


def render_template(source: str, args: Mapping[str, Any]) -> str:
    """Render a policy template with the tool's argument object as ``args``.

    Raises ``PolicyError`` if the template itself is broken, and ``TemplateRenderError`` (an
    ``InvalidInput``) for anything the arguments cause: a missing argument (StrictUndefined),
    a sandbox violation such as ``{{ ''.__class__ }}``, or any other runtime failure.
    """
    try:
        template = _compile(source)
    except TemplateSyntaxError as exc:
        raise PolicyError(f"template {source!r} is not valid: {exc.message} (line {exc.lineno})") from exc
    try:
        return template.render(args=args)
    except TemplateError as exc:
        raise TemplateRenderError(f"cannot render template {source!r}: {exc.message or exc}") from exc
    except Exception as exc:  # the arguments are untrusted: any failure is the caller's to fix
        raise TemplateRenderError(f"cannot render template {source!r}: {exc}") from exc


# ---------------------------------------------------------------- globs


def _glob_component(part: str, pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            start = i + 2 if part[i + 1 : i + 2] in ("!", "^") else i + 1
            end = part.find("]", start + 1)  # a ']' right after '[' or '[!' is a literal
            if end < 0:
                raise ValueError(f"glob {pattern!r} has an unclosed '['")
            negate = start > i + 1
            body = part[start:end]
            for special in "\\^[]":
                body = body.replace(special, "\\" + special)
            # (?!/) keeps a class such as [!a] or [--0] from ever matching the separator.
            out.append(f"(?!/)[{'^' if negate else ''}{body}]")
            i = end
        elif ch == "\\":
            raise ValueError(
                f"glob {pattern!r} contains '\\': separate folders with '/', write [*] for a literal *"
            )
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob to a regex: ``**`` spans folders, ``*``, ``?`` and ``[..]`` never cross '/'.

    ``a/**/b`` and ``**/b`` let ``**`` stand for zero or more folders; a trailing ``a/**`` means
    "anything inside a" (at least one component), so it never matches a file named ``a``.
    """
    if pattern == "**":
        return re.compile(".*", re.DOTALL)
    parts = pattern.split("/")
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            if last:
                regex += "(?:/[^/]+)+" if index else ".*"
            else:
                regex += "(?:[^/]+/)*" if index == 0 else "/(?:[^/]+/)*"
            continue
        if index and parts[index - 1] != "**":
            regex += "/"
        regex += _glob_component(part, pattern)
    return re.compile(regex, re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """True if the workspace-relative POSIX ``path`` matches ``pattern`` (see ``_glob_regex``)."""
    return _glob_regex(pattern).fullmatch(path) is not None


def _check_glob(pattern: str) -> str:
    if not pattern:
        _fail("a glob must not be empty (use '**' for any file)")
    if pattern.startswith("/"):
        _fail(f"glob {pattern!r} must be relative to the workspace (drop the leading '/')")
    parts = pattern.split("/")
    if "" in parts:
        _fail(f"glob {pattern!r} has an empty folder name ('//' or a trailing '/')")
    if "." in parts or ".." in parts:
        _fail(f"glob {pattern!r} must not contain '.' or '..' folders (paths are normalised first)")
    try:
        _glob_regex(pattern)
    except (ValueError, re.error) as exc:
        _fail(str(exc))
    return pattern


# ---------------------------------------------------------------- scalar types


def _parse_duration(value: object) -> object:
    if isinstance(value, timedelta):
        return value
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if not match:
        _fail(f"expected a duration such as '90s', '30m', '24h' or '7d', got {_kind(value)}")
    seconds = int(match[1]) * _UNITS[match[2]]
    if seconds <= 0:
        _fail("a duration must be longer than zero")
    if seconds > _MAX_DURATION.total_seconds():
        _fail("a duration must be at most 3650d")
    return timedelta(seconds=seconds)


def _parse_file_mode(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        _fail('expected an octal string such as "0644", got a number (quote it, e.g. file_mode: "0644")')
    if not isinstance(value, str) or not re.fullmatch(r"(?:0o)?[0-7]{3,4}", value):
        _fail(f'expected an octal string such as "0644", got {_kind(value)}')
    mode = int(value.removeprefix("0o"), 8)
    if mode > 0o777:
        _fail(f"file mode {value} sets setuid, setgid or sticky bits; use at most 0777")
    return mode


def _check_version(value: object) -> object:
    if isinstance(value, bool) or value != 1:
        _fail(f"unsupported policy version {value!r}: this Gatekeeper reads 'version: 1'")
    return 1


def _check_server_name(name: str) -> str:
    if not _SERVER_NAME.fullmatch(name):
        _fail(
            f"server name {name!r} must start with a lowercase letter and use only a-z, 0-9, '_' and '-'"
            " (at most 32 characters)"
        )
    return name


def _check_tool_name(name: str) -> str:
    if not name or len(name) > 128 or any(ch.isspace() or not ch.isprintable() for ch in name):
        _fail(f"tool name {name!r} must be 1-128 printable characters without spaces")
    return name


Duration = Annotated[timedelta, BeforeValidator(_parse_duration)]
FileMode = Annotated[int, BeforeValidator(_parse_file_mode)]
NonEmpty = Annotated[StrictStr, Field(min_length=1)]
Bytes = Annotated[StrictInt, Field(gt=0, le=_MAX_BYTES_CAP)]
Glob = Annotated[StrictStr, AfterValidator(_check_glob)]
ServerName = Annotated[StrictStr, AfterValidator(_check_server_name)]
ToolName = Annotated[StrictStr, AfterValidator(_check_tool_name)]

_CONFIG = ConfigDict(extra="forbid", frozen=True)


def _resolve(value: object, info: ValidationInfo) -> object:
    """Resolve a relative path against the policy file's folder, so any cwd gives the same result."""
    if not isinstance(value, str) or not value:
        return value  # let the field's own type report it
    base = Path((info.context or {}).get("base_dir") or Path.cwd())
    return Path(os.path.normpath(base / os.path.expanduser(value)))


# ---------------------------------------------------------------- models


class Defaults(BaseModel):
    """Values a ``propose`` rule inherits when it does not set them itself."""

    model_config = _CONFIG
    expires_after: Duration = timedelta(days=7)
    max_bytes: Bytes = 1024 * 1024


class Source(BaseModel):
    """Where a proposal's path or content comes from: one argument, or a template over ``args``."""

    model_config = _CONFIG
    arg: NonEmpty | None = None
    template: NonEmpty | None = None

    @field_validator("template")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                _compile(value)
            except TemplateSyntaxError as exc:
                _fail(f"template syntax error: {exc.message} (template line {exc.lineno})")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Source:
        if (self.arg is None) == (self.template is None):
            _fail("give exactly one of 'arg' or 'template'")
        return self

    def render(self, args: Mapping[str, Any]) -> Any:
        """The argument's raw value (may be missing: None) or the rendered template text."""
        return args.get(self.arg) if self.arg is not None else render_template(self.template or "", args)

    def label(self) -> str:
        return f"arg:{self.arg}" if self.arg is not None else f"template:{self.template}"


class Propose(BaseModel):
    """How a write call becomes a proposal, and the limits a proposal must fit."""

    model_config = _CONFIG
    path: Source
    content: Source
    encoding: Literal["text", "base64"] = "text"
    globs: tuple[Glob, ...] = ("**",)
    max_bytes: Bytes = Defaults().max_bytes
    expires_after: Duration = Defaults().expires_after
    file_mode: FileMode = 0o644
    wait_seconds: Annotated[StrictInt, Field(ge=0, le=600)] = 0

    @field_validator("globs")
    @classmethod
    def _some_globs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            _fail("needs at least one glob (use ['**'] to allow any path in the workspace)")
        return value

    def allows(self, path: str) -> bool:
        """True if the workspace-relative POSIX path matches one of the rule's globs."""
        return any(glob_match(pattern, path) for pattern in self.globs)


class ToolRule(BaseModel):
    """``allow`` / ``deny`` in YAML, or a mapping with the single key ``propose``."""

    model_config = _CONFIG
    yaml_keys: ClassVar[tuple[str, ...]] = ("propose",)
    action: Literal["allow", "deny", "propose"]
    propose: Propose | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_yaml(cls, value: object) -> object:
        if isinstance(value, ToolRule):
            return value
        expected = "expected 'allow', 'deny' or a mapping with 'propose'"
        if isinstance(value, str):
            if value in ("allow", "deny"):
                return {"action": value}
            _fail(f"{expected}, got {value!r}{_suggest(value, ['allow', 'deny', 'propose'])}")
        if isinstance(value, dict):
            if "propose" in value and "action" not in value:
                return {"action": "propose", **value}
            if not value:
                _fail(f"{expected}, got an empty mapping")
            keys = ", ".join(repr(key) for key in value)
            _fail(f"{expected}, got a mapping with {keys}{_suggest(next(iter(value)), ['propose'])}")
        _fail(f"{expected}, got {_kind(value)}")


_DENY = ToolRule.model_validate("deny")


class Server(BaseModel):
    """One downstream MCP server: how to start it, its workspace, and its tool rules."""

    model_config = _CONFIG
    command: NonEmpty
    args: tuple[StrictStr, ...] = ()
    env: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    cwd: Path | None = None
    workspace: Path
    prefix: StrictStr | None = None
    tools: dict[ToolName, ToolRule] = Field(default_factory=dict)

    @field_validator("command")
    @classmethod
    def _command(cls, value: str, info: ValidationInfo) -> str:
        # './bin/server' is relative to the policy file; a bare 'python' is found on PATH.
        if "/" in value or value.startswith("~"):
            return str(_resolve(value, info))
        return value

    @field_validator("cwd", "workspace", mode="before")
    @classmethod
    def _paths(cls, value: object, info: ValidationInfo) -> object:
        return _resolve(value, info)

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        if value is not None and not _PREFIX.fullmatch(value):
            _fail(f"prefix {value!r} must start with a lowercase letter and use only a-z, 0-9, '_' and '-'")
        return value


class Policy(BaseModel):
    """The validated policy. Build it with ``load_policy``, which also records file and lines."""

    model_config = _CONFIG
    version: Annotated[Literal[1], BeforeValidator(_check_version)]
    review_url: StrictStr = DEFAULT_REVIEW_URL
    defaults: Defaults = Defaults()
    servers: dict[ServerName, Server] = Field(min_length=1)

    _source: Path = PrivateAttr(default_factory=lambda: Path.cwd() / "policy.yaml")
    _display: str = PrivateAttr(default="policy.yaml")
    _lines: dict[tuple[Any, ...], int] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _inherit(cls, data: object) -> object:
        """Copy ``defaults`` and the server name into rules/servers that leave them out.

        Doing it before validation means every ``Propose`` holds its effective limits, so the
        proxy and committer never need to know that defaults exist, and the digest covers them.
        """
        if not isinstance(data, dict) or not isinstance(data.get("servers"), dict):
            return data
        raw_defaults = data.get("defaults") or {}
        try:
            Defaults.model_validate(raw_defaults)
        except ValidationError:
            raw_defaults = {}  # reported at 'defaults'; rules fall back to the built-in defaults
        servers: dict[Any, Any] = {}
        for name, server in data["servers"].items():
            if isinstance(server, dict):
                server = dict(server)
                if isinstance(name, str) and _SERVER_NAME.fullmatch(name):
                    server.setdefault("prefix", name)
                if isinstance(server.get("tools"), dict):
                    tools = {}
                    for tool, rule in server["tools"].items():
                        if isinstance(rule, dict) and isinstance(rule.get("propose"), dict):
                            rule = {**rule, "propose": {**raw_defaults, **rule["propose"]}}
                        tools[tool] = rule
                    server["tools"] = tools
            servers[name] = server
        return {**data, "servers": servers}

    @field_validator("review_url")
    @classmethod
    def _review_url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^/\s?#]+(/[^\s?#]*)?", value):
            _fail(f"expected an http:// or https:// base URL such as {DEFAULT_REVIEW_URL!r}, got {value!r}")
        return value.rstrip("/")

    # ---- where it came from

    @property
    def source(self) -> Path:
        """Absolute path of the policy file."""
        return self._source

    @property
    def base_dir(self) -> Path:
        """The folder relative paths in the policy resolve against."""
        return self._source.parent

    @property
    def digest(self) -> str:
        """sha256 of the effective policy as canonical JSON: comments and layout do not count."""
        canonical = json.dumps(
            self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def _where(self, path: tuple[Any, ...]) -> str:
        return _locate(self._display, _line_of(self._lines, path), path)

    # ---- naming

    def rule(self, server: str, tool: str) -> ToolRule:
        """The rule for a downstream tool; tools the policy does not name are denied."""
        return self.servers[server].tools.get(tool) or _DENY

    def host_name(self, server: str, tool: str) -> str:
        """The name the host sees: unchanged with one server, ``<prefix>__<tool>`` with several."""
        if len(self.servers) == 1:
            return tool
        return f"{self.servers[server].prefix or server}__{tool}"

    def exposed_tools(self) -> dict[str, tuple[str, str]]:
        """Host-facing name -> (server, tool) for every allowed or proposed tool; clashes are errors."""
        prefixes: dict[str, str] = {}
        if len(self.servers) > 1:
            for name, server in self.servers.items():
                prefix = server.prefix or name
                if prefix in prefixes:
                    # Point at the server whose 'prefix' line is written out: that is the one to change.
                    culprit, other = name, prefixes[prefix]
                    if ("servers", name, "prefix") not in self._lines and (
                        "servers",
                        other,
                        "prefix",
                    ) in self._lines:
                        culprit, other = other, name
                    key: tuple[str, ...] = ("servers", culprit, "prefix")
                    where = self._where(key if key in self._lines else key[:2])
                    raise PolicyError(
                        f"{where}: prefix {prefix!r} is already used by server {other!r}"
                        " (give each server its own 'prefix')"
                    )
                prefixes[prefix] = name
        exposed: dict[str, tuple[str, str]] = {}
        for name, server in self.servers.items():
            for tool, rule in server.tools.items():
                if rule.action == "deny":
                    continue
                host = self.host_name(name, tool)
                key = ("servers", name, "tools", tool)
                if host == RESERVED_TOOL:
                    raise PolicyError(
                        f"{self._where(key)}: the tool name {RESERVED_TOOL!r} is reserved by Gatekeeper "
                        "(deny this tool, or add a second server so names get a prefix)"
                    )
                if host in exposed:
                    other = ".".join(("servers", exposed[host][0], "tools", exposed[host][1]))
                    raise PolicyError(f"{self._where(key)}: host-facing name {host!r} clashes with {other}")
                exposed[host] = (name, tool)
        return exposed

    # ---- reporting

    def describe(self) -> list[dict[str, Any]]:
        """One row per named (server, tool) with its effective rule, for ``policy check``."""
        exposed = {value: host for host, value in self.exposed_tools().items()}
        rows = []
        for name, server in self.servers.items():
            for tool, rule in server.tools.items():
                p = rule.propose
                rows.append(
                    {
                        "server": name,
                        "tool": tool,
                        "host_name": exposed.get((name, tool)),
                        "action": rule.action,
                        "path": p.path.label() if p else None,
                        "content": p.content.label() if p else None,
                        "encoding": p.encoding if p else None,
                        "globs": list(p.globs) if p else None,
                        "max_bytes": p.max_bytes if p else None,
                        "expires_after": int(p.expires_after.total_seconds()) if p else None,
                        "file_mode": f"{p.file_mode:04o}" if p else None,
                        "wait_seconds": p.wait_seconds if p else None,
                    }
                )
        return rows

    def check_workspaces(self) -> list[str]:
        """Problems a person must fix before serving: missing workspace or cwd folders."""
        problems = []
        for name, server in self.servers.items():
            for key, folder in (("workspace", server.workspace), ("cwd", server.cwd)):
                if folder is None:
                    continue
                where = self._where(("servers", name, key))
                if not folder.exists():
                    problems.append(f"{where}: {folder} does not exist (create it: mkdir -p {folder})")
                elif not folder.is_dir():
                    problems.append(f"{where}: {folder} is not a directory")
        return problems


# ---------------------------------------------------------------- YAML with positions


class _Loader(yaml.SafeLoader):
    """SafeLoader that records the line of every key path and refuses duplicate keys.

    PyYAML silently keeps the last of two equal keys, which would let a stray ``allow`` hide
    an earlier ``deny``; here that is an error.
    """

    _MERGE = "tag:yaml.org,2002:merge"

    def record_positions(self, root: yaml.Node, lines: dict, nodes: dict, display: str) -> None:
        """Fill ``lines`` (key path -> 1-based line) and ``nodes`` (key path -> value node)."""
        self._lines, self._nodes, self._display, self._budget = lines, nodes, display, _MAX_NODES
        self._walk(root, (), frozenset(), merged=False)

    def _walk(self, node: yaml.Node, path: tuple[Any, ...], stack: frozenset[int], merged: bool) -> None:
        self._budget -= 1
        if self._budget < 0:
            raise PolicyError(
                f"{self._display}: too many YAML nodes (aliases expand to more than {_MAX_NODES})"
            )
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
                    raise PolicyError(
                        f"{_locate(self._display, line, path)}: keys must be plain names"
                    ) from None
                if first is not None:
                    raise PolicyError(
                        f"{_locate(self._display, line, path)}: duplicate key {key!r} (first at line {first})"
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


def _line_of(lines: Mapping[tuple[Any, ...], int], path: tuple[Any, ...]) -> int:
    """The line of the deepest part of ``path`` present in the file (0: unknown)."""
    for depth in range(len(path), -1, -1):
        if path[:depth] in lines:
            return lines[path[:depth]]
    return 0


def _locate(display: str, line: int, path: tuple[Any, ...]) -> str:
    """``file:line: key.path``, dropping whatever part is unknown."""
    dotted = _dotted(path)
    head = f"{display}:{line}" if line else display
    return f"{head}: {dotted}" if dotted else head


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) and not isinstance(part, bool) else f".{part}"
    return out.lstrip(".")


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


def _explain(error: Mapping[str, Any], path: tuple[Any, ...], node: yaml.Node | None) -> tuple[tuple, str]:
    """Rewrite one pydantic error as (key path to show, sentence)."""
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "policy":
        return path, ctx["message"]
    if kind == "missing":
        extra = " (add 'version: 1' at the top)" if path == ("version",) else ""
        return path[:-1], f"missing required key {path[-1]!r}{extra}"
    if kind == "extra_forbidden":
        return path[:-1], f"unknown key {path[-1]!r}{_suggest(path[-1], _allowed_keys(path[:-1]))}"
    if kind == "string_type":
        text = f"expected a string, got {_kind(value)}"
        if isinstance(value, bool | int | float):
            raw = node.value if isinstance(node, yaml.ScalarNode) else str(value)
            text += f' (quote it: "{raw}")'
        elif value is None:
            text += ' (write "" for an empty string)'
        return path, text
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return path, f"expected a whole number, got {_kind(value)}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return path, f"expected a mapping (indented 'key: value' lines), got {_kind(value)}"
    if kind in ("tuple_type", "list_type"):
        return path, f"expected a list such as [a, b], got {_kind(value)}"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", ctx.get("expected", ""))
        return path, f"expected {ctx.get('expected')}, got {_kind(value)}{_suggest(value, choices)}"
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


def _messages(exc: ValidationError, display: str, lines: dict, nodes: dict) -> Iterator[tuple[int, str]]:
    errors = [
        (error, tuple(part for part in error["loc"] if part != "[key]"))
        for error in exc.errors(include_url=False)
    ]
    # "unknown key 'comand' (did you mean 'command'?)" already covers "missing 'command'".
    meant = set()
    for error, loc in errors:
        if error["type"] == "extra_forbidden":
            meant.update((*loc[:-1], key) for key in _close(loc[-1], _allowed_keys(loc[:-1])))
    for error, loc in errors:
        if error["type"] == "missing" and loc in meant:
            continue
        shown, text = _explain(error, loc, nodes.get(loc))
        # An unknown key is reported on its own line, under its parent's path.
        line = lines.get(loc) if error["type"] == "extra_forbidden" else None
        line = line or _line_of(lines, shown)
        yield line, f"{_locate(display, line, shown)}: {text}"


def _parse(text: str, source: Path, display: str) -> Policy:
    loader = _Loader(text)
    lines: dict[tuple[Any, ...], int] = {}
    nodes: dict[tuple[Any, ...], yaml.Node] = {}
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
        policy = Policy.model_validate(data, context={"base_dir": source.parent})
    except ValidationError as exc:
        found = sorted(set(_messages(exc, display, lines, nodes)))
        shown = [message for _, message in found[:10]]
        if len(found) > 10:
            shown.append(f"... and {len(found) - 10} more")
        raise PolicyError("\n".join(shown)) from None
    policy._source = source
    policy._display = display
    policy._lines = lines
    policy.exposed_tools()  # name clashes are load errors, not surprises at the first tools/list
    return policy


def _find(path: str | os.PathLike[str] | None, home: Path | None) -> tuple[Path, str]:
    """Pick the policy file: explicit path, then $GATEKEEPER_POLICY, ./policy.yaml, home/policy.yaml."""
    if path is not None:
        given = os.fspath(path)
        if not Path(given).is_file():
            what = "is a directory, not a policy file" if Path(given).is_dir() else "no such policy file"
            raise PolicyError(f"{given}: {what}", "check the --policy path")
        return Path(given), given
    env = os.environ.get("GATEKEEPER_POLICY")
    if env:
        if not Path(env).is_file():
            raise PolicyError(
                f"$GATEKEEPER_POLICY is {env}, which is not a file", "fix or unset GATEKEEPER_POLICY"
            )
        return Path(env), env
    if Path("policy.yaml").is_file():
        return Path("policy.yaml"), "policy.yaml"
    looked = ["$GATEKEEPER_POLICY (not set)", str(Path.cwd() / "policy.yaml")]
    if home is not None:
        candidate = Path(home) / "policy.yaml"
        if candidate.is_file():
            return candidate, str(candidate)
        looked.append(str(candidate))
    raise PolicyError(
        "no policy file found; looked at " + ", ".join(looked),
        "pass --policy FILE or create policy.yaml; `gatekeeper policy check` validates it",
    )


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
