"""The validated policy as frozen pydantic models: servers, their tools, and each tool's rule.

Everything downstream (the proxy, the committer, ``gatekeeper policy check``) trusts these
objects and never re-reads the YAML, so they hold effective values (defaults already
applied, paths already absolute) and answer the questions callers ask: which rule, which name.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gatekeeper.canonical import duration_seconds
from gatekeeper.errors import PolicyError
from gatekeeper.names import PREFIX, SERVER
from gatekeeper.policy.messages import describe_value, fail, line_of, locate, suggest
from gatekeeper.policy.propose import DEFAULT_EXPIRES_AFTER, DEFAULT_MAX_BYTES, Propose, Source
from gatekeeper.policy.remote import DEFAULT_TIMEOUT, Header, check_network, check_url, header_from_yaml
from gatekeeper.policy.review_site import ReviewSite
from gatekeeper.policy.reviewers import ReviewerName, ReviewerScope, check_scopes
from gatekeeper.policy.scalars import (
    Bytes,
    Duration,
    NonEmpty,
    ServerName,
    ToolName,
    Version,
    resolve_path,
)

__all__ = [
    "DEFAULT_REVIEW_URL",
    "RESERVED_TOOL",
    "Defaults",
    "Policy",
    "Propose",
    "Server",
    "Source",
    "ToolRule",
]

RESERVED_TOOL = "gatekeeper_proposal_status"
DEFAULT_REVIEW_URL = "http://localhost:8765"  # localhost, not 127.0.0.1: passkeys refuse an IP address
_CONFIG = ConfigDict(extra="forbid", frozen=True)


class Defaults(BaseModel):
    """Values a ``propose`` rule inherits when it does not set them itself."""

    model_config = _CONFIG
    expires_after: Duration = DEFAULT_EXPIRES_AFTER
    max_bytes: Bytes = DEFAULT_MAX_BYTES


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
            fail(f"{expected}, got {value!r}{suggest(value, ['allow', 'deny', 'propose'])}")
        if isinstance(value, dict):
            if "propose" in value and "action" not in value:
                return {"action": "propose", **value}
            if not value:
                fail(f"{expected}, got an empty mapping")
            keys = ", ".join(repr(key) for key in value)
            fail(f"{expected}, got a mapping with {keys}{suggest(next(iter(value)), ['propose'])}")
        fail(f"{expected}, got {describe_value(value)}")


_DENY = ToolRule.model_validate("deny")
_SHADOW = ToolRule.model_validate({"propose": {"mode": "shadow"}})


class Server(BaseModel):
    """One downstream MCP server: how to start it, its workspace, and its tool rules."""

    model_config = _CONFIG
    command: NonEmpty | None = None
    url: StrictStr | None = None
    headers: dict[StrictStr, Header] = Field(default_factory=dict)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=3600)
    allow_remote: StrictBool = False
    allow_addresses: tuple[StrictStr, ...] = ()
    args: tuple[StrictStr, ...] = ()
    env: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    # Run in the policy file's folder unless told otherwise, so './x' in args means the same
    # file wherever the proxy is started from.
    cwd: Path = Field(default=".", validate_default=True)
    workspace: Path
    prefix: StrictStr | None = None
    tools: dict[ToolName, ToolRule] = Field(default_factory=dict)
    # What happens to a tool the policy does not name: denied, or every such write run in a sandbox
    # and proposed as the change set it made (``unlisted: shadow``, one line for a whole server).
    unlisted: Literal["deny", "shadow"] = "deny"

    @field_validator("command")
    @classmethod
    def _command(cls, value: str | None, info: ValidationInfo) -> str | None:
        # './bin/server' is relative to the policy file; a bare 'python' is found on PATH.
        if value is not None and ("/" in value or value.startswith("~")):
            return str(resolve_path(value, info))
        return value

    @field_validator("cwd", "workspace", mode="before")
    @classmethod
    def _paths(cls, value: object, info: ValidationInfo) -> object:
        if value is None and info.field_name == "cwd":
            value = "."  # 'cwd:' left empty means the default, like leaving it out
        return resolve_path(value, info)

    @field_validator("headers", mode="before")
    @classmethod
    def _headers(cls, value: object) -> object:
        if isinstance(value, dict):
            return {name: header_from_yaml(name, header) for name, header in value.items()}
        return value

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, value: object) -> object:
        if isinstance(value, str):  # '30s', '2m' like every other duration in the policy
            seconds = duration_seconds(value)
            if seconds is None:
                fail(f"expected seconds or a duration such as '30s' or '2m', got {value!r}")
            return seconds
        return value

    @field_validator("allow_addresses")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_network(entry) for entry in value)

    @model_validator(mode="after")
    def _one_transport(self) -> Server:
        """A server is a program to start (``command``) or an endpoint to talk to (``url``), never both."""
        given = self.model_fields_set
        stray: list[str]
        if self.command is None and self.url is None:
            fail("missing 'command' (a program to start) or 'url' (a Streamable HTTP endpoint)")
        if self.command is not None and self.url is not None:
            fail("a server has either 'command' or 'url', not both")
        if self.url is not None:
            check_url(self.url, self.allow_remote)
            stray = [key for key in ("args", "env", "cwd") if key in given]
            transport = "'url' servers (they are not started by Gatekeeper)"
        else:
            stray = [key for key in ("headers", "timeout", "allow_remote", "allow_addresses") if key in given]
            transport = "'command' servers (they speak stdio)"
        if stray:
            fail(f"{', '.join(repr(key) for key in stray)} does not apply to {transport}")
        if self.url is not None:
            self._no_shadow()
        return self

    def _no_shadow(self) -> None:
        """A url server runs elsewhere: there is no copy of its code to run in a sandbox."""
        why = "a 'url' server cannot be shadowed (its code runs elsewhere, not in a sandbox here)"
        if self.unlisted == "shadow":
            fail(f"unlisted: shadow: {why}; use 'deny', or a 'command' server")
        for tool, rule in self.tools.items():
            if rule.propose is not None and rule.propose.mode == "shadow":
                fail(f"tools.{tool}: mode shadow: {why}; use create, replace, append, edit or delete")

    @property
    def is_remote(self) -> bool:
        """Reached over Streamable HTTP rather than started as a child on stdio."""
        return self.url is not None

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        if value is not None and not PREFIX.allows(value):
            fail(f"prefix {value!r} {PREFIX.rule}")
        return value


class Policy(BaseModel):
    """The validated policy. Build it with ``load_policy`` (or ``from_document``), which also records file and lines."""

    model_config = _CONFIG
    version: Version
    review_url: StrictStr = DEFAULT_REVIEW_URL
    # How an approval must be proven (issue 14): 'any' takes a passkey, or the password typed again
    # by a reviewer without one; 'passkey' refuses password approvals, here and in the committer.
    approve_with: Literal["any", "passkey"] = "any"
    defaults: Defaults = Defaults()
    servers: dict[ServerName, Server] = Field(min_length=1)
    reviewers: dict[ReviewerName, ReviewerScope] = Field(default_factory=dict)  # unlisted: may decide all
    review: ReviewSite = ReviewSite()  # Host names and Origins the review page answers besides its own

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
                if isinstance(name, str) and SERVER.allows(name):
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

    @field_validator("reviewers")
    @classmethod
    def _scopes(cls, value: dict[str, ReviewerScope], info: ValidationInfo) -> dict[str, ReviewerScope]:
        check_scopes(value, info.data.get("servers") or {})
        return value

    @field_validator("review_url")
    @classmethod
    def _review_url(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^/\s?#]+(/[^\s?#]*)?", value):
            fail(f"expected an http:// or https:// base URL such as {DEFAULT_REVIEW_URL!r}, got {value!r}")
        return value.rstrip("/")

    # ---- where it came from

    @classmethod
    def from_document(
        cls, data: object, *, source: Path, display: str, lines: dict[tuple[Any, ...], int] | None = None
    ) -> Policy:
        """Validate a parsed policy file, keeping where it came from (not part of the digest).

        ``source`` is the file's absolute path (relative paths resolve against its folder),
        ``display`` how to name it in messages, ``lines`` each key path's line number.
        """
        policy = cls.model_validate(data, context={"base_dir": source.parent})
        policy._source, policy._display, policy._lines = source, display, dict(lines or {})
        return policy

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
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def where(self, path: tuple[Any, ...]) -> str:
        """``file:line: key.path`` for a key path, as every policy message starts."""
        return locate(self._display, line_of(self._lines, path), path)

    # ---- naming

    def rule(self, server: str, tool: str) -> ToolRule:
        """The rule for a downstream tool; a tool the policy does not name follows ``unlisted``."""
        spec = self.servers[server]
        named = spec.tools.get(tool)
        if named is not None:
            return named
        return _SHADOW if spec.unlisted == "shadow" else _DENY

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
                    written = {n for n in (name, other) if ("servers", n, "prefix") in self._lines}
                    if written == {other}:
                        culprit, other = other, name
                    key: tuple[str, ...] = ("servers", culprit, "prefix")
                    where = self.where(key if key in self._lines else key[:2])
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
                        f"{self.where(key)}: the tool name {RESERVED_TOOL!r} is reserved by Gatekeeper "
                        "(deny this tool, or add a second server so names get a prefix)"
                    )
                if host in exposed:
                    other = ".".join(("servers", exposed[host][0], "tools", exposed[host][1]))
                    raise PolicyError(f"{self.where(key)}: host-facing name {host!r} clashes with {other}")
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
                        "mode": p.mode if p else None,
                        "path": p.path.label() if p and p.path else None,
                        "content": p.content.label() if p and p.content else None,
                        "edits": _edits_label(p) if p and p.mode == "edit" else None,
                        "when": dict(p.when) if p and p.when else None,
                        "encoding": p.encoding if p else None,
                        "globs": list(p.globs) if p else None,
                        "max_bytes": p.max_bytes if p else None,
                        "expires_after": int(p.expires_after.total_seconds()) if p else None,
                        "file_mode": f"{p.file_mode:04o}" if p and p.file_mode is not None else None,
                        "wait_seconds": p.wait_seconds if p else None,
                    }
                )
        return rows

    def check_workspaces(self) -> list[str]:
        """Problems a person must fix before serving: missing workspace or cwd folders."""
        problems = []
        for name, server in self.servers.items():
            for key, folder in (("workspace", server.workspace), ("cwd", server.cwd)):
                where = self.where(("servers", name, key))
                if not folder.exists():
                    problems.append(f"{where}: {folder} does not exist (create it: mkdir -p {folder})")
                elif not folder.is_dir():
                    problems.append(f"{where}: {folder} is not a directory")
        return problems


def _edits_label(rule: Any) -> str:
    """``arg:edits [oldText → newText, dry run: dryRun]``: where an edit rule finds its edits."""
    e = rule.edit_list
    dry = f", dry run: {e.dry_run}" if e.dry_run else ""
    return f"arg:{e.arg} [{e.old} → {e.new}{dry}]"
