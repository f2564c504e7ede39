"""A ``propose`` rule: how a write call becomes a proposal, and the limits a proposal must fit.

A rule has a **mode** that says what the call does to its destination: ``create`` a new file,
``replace`` an existing one with the call's content, ``append`` the content to it, ``edit`` it
with the call's list of old → new text edits, or ``delete`` it. Each mode takes exactly the keys
that mean something for it, so ``separator`` on a ``replace`` is a policy error, not a setting
silently ignored.

``shadow`` is different: Gatekeeper computes nothing. The server's own code runs the call in a
sandbox over the workspace, and what it changed (any files and folders) becomes one proposal: a
change set. Its keys are limits (``max_files``, ``max_total_bytes``, ``max_bytes`` per file,
``timeout``) and ``ignore``: globs of the server's own bookkeeping to leave out of the set
(obsidian-mcp's ``.obsidian-mcp/**``). ``globs`` limits which paths the set may touch.

``when`` limits a rule to calls whose arguments have given values, for a tool that does several
things under one name (obsidian-mcp's ``obsidian_edit_note`` appends, prepends or replaces by its
``operation`` argument): ``when: {operation: append}`` proposes only the append and refuses the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from gatekeeper.policy.globs import glob_match
from gatekeeper.policy.messages import fail
from gatekeeper.policy.scalars import Bytes, Duration, FileMode, Glob, NonEmpty
from gatekeeper.policy.templating import render_template, syntax_error

__all__ = [
    "DEFAULT_EXPIRES_AFTER",
    "DEFAULT_MAX_BYTES",
    "MODES",
    "NEW_FILE_MODE",
    "SHADOW_DEFAULTS",
    "Edits",
    "Mode",
    "Propose",
    "Source",
]

_CONFIG = ConfigDict(extra="forbid", frozen=True)
Mode = Literal["create", "replace", "append", "edit", "delete", "shadow"]
MODES: tuple[str, ...] = ("create", "replace", "append", "edit", "delete", "shadow")
DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_EXPIRES_AFTER = timedelta(days=7)
NEW_FILE_MODE = 0o644
"""A new file's permissions when the rule sets no ``file_mode`` (a change keeps the file's own)."""
SHADOW_DEFAULTS: dict[str, Any] = {
    "timeout": timedelta(seconds=60),
    "max_files": 1000,
    "max_total_bytes": 64 * 1024 * 1024,
}
"""A shadow rule's limits when it sets none: a minute, a thousand paths, 64 MiB in all."""
_SHADOW_ONLY = ("ignore", "timeout", "max_files", "max_total_bytes")
_NOT_FOR_SHADOW = ("content", "edits", "separator", "create_if_missing", "encoding", "file_mode")


class Source(BaseModel):
    """Where a proposal's path or content comes from: one argument, or a template over ``args``."""

    model_config = _CONFIG
    arg: NonEmpty | None = None
    template: NonEmpty | None = None

    @field_validator("template")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None and (problem := syntax_error(value)) is not None:
            fail(f"template syntax error: {problem}")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Source:
        if (self.arg is None) == (self.template is None):
            fail("give exactly one of 'arg' or 'template'")
        return self

    def render(self, args: Mapping[str, Any]) -> Any:
        """The argument's raw value (may be missing: None) or the rendered template text."""
        return args.get(self.arg) if self.arg is not None else render_template(self.template or "", args)

    def label(self) -> str:
        return f"arg:{self.arg}" if self.arg is not None else f"template:{self.template}"


class Edits(BaseModel):
    """Where an ``edit`` call keeps its edit list, and the two keys of each item.

    The defaults are the reference filesystem server's ``edit_file``:
    ``{"edits": [{"oldText": ..., "newText": ...}], "dryRun": false}``.
    """

    model_config = _CONFIG
    arg: NonEmpty = "edits"
    old: NonEmpty = "oldText"
    new: NonEmpty = "newText"
    dry_run: NonEmpty | None = "dryRun"  # a true value here: answer with the diff, record nothing


_NEEDS_CONTENT = ("create", "replace", "append")


class Propose(BaseModel):
    """How a write call becomes a proposal, and the limits a proposal must fit."""

    model_config = _CONFIG
    mode: Mode = "create"
    path: Source | None = None  # every mode but shadow (whose paths are whatever the server changed)
    content: Source | None = None
    edits: Edits | None = None
    separator: StrictStr | None = None  # append: put this first unless the file already ends with it
    create_if_missing: StrictBool = False  # replace/append: a missing destination is created instead
    encoding: Literal["text", "base64"] = "text"
    globs: tuple[Glob, ...] = ("**",)
    max_bytes: Bytes = DEFAULT_MAX_BYTES  # the resulting file, and the base a change is read from
    expires_after: Duration = DEFAULT_EXPIRES_AFTER
    file_mode: FileMode | None = None  # None: NEW_FILE_MODE for a new file, a changed file keeps its own
    wait_seconds: Annotated[StrictInt, Field(ge=0, le=600)] = 0
    when: dict[NonEmpty, StrictStr | StrictBool | StrictInt] | None = None  # argument -> the only value proposed
    approvals: StrictInt = 1  # distinct reviewers who must approve (issue 15; policy/reviewers.py)
    ignore: tuple[Glob, ...] = ()  # shadow: the server's bookkeeping, left out of the change set
    timeout: Duration | None = None  # shadow: the whole sandboxed call, start to end
    max_files: Annotated[StrictInt, Field(gt=0, le=100_000)] | None = None  # shadow: paths in one set
    max_total_bytes: Bytes | None = None  # shadow: the set's bytes in all

    @field_validator("approvals")
    @classmethod
    def _approvals(cls, value: int) -> int:
        if not 1 <= value <= 5:
            fail(f"'approvals' is how many distinct reviewers must approve: 1 to 5, not {value}")
        return value

    @field_validator("when")
    @classmethod
    def _some_conditions(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not value:
            fail("'when' needs at least one argument and its value (or leave 'when' out)")
        return value

    @field_validator("globs")
    @classmethod
    def _some_globs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            fail("needs at least one glob (use ['**'] to allow any path in the workspace)")
        return value

    @model_validator(mode="after")
    def _keys_fit_the_mode(self) -> Propose:
        mode = self.mode
        given = self.model_fields_set
        if mode == "shadow":
            return self._shadow_keys(given)
        if self.path is None:
            fail(f"mode {mode!r} needs 'path' (where the destination comes from: {{arg: NAME}} or {{template: ...}})")
        for key in _SHADOW_ONLY:
            if key in given:
                fail(f"{key!r} belongs to mode 'shadow', not {mode!r}; remove it or set mode: shadow")
        if mode in _NEEDS_CONTENT and self.content is None:
            fail(f"mode {mode!r} needs 'content' (where the bytes come from: {{arg: NAME}} or {{template: ...}})")
        if mode not in _NEEDS_CONTENT and self.content is not None:
            hint = "the new text comes from 'edits'" if mode == "edit" else "a delete has no content"
            fail(f"mode {mode!r} takes no 'content' ({hint}); remove it")
        if self.edits is not None and mode != "edit":
            fail(f"'edits' belongs to mode 'edit', not {mode!r}; remove it or set mode: edit")
        if self.separator is not None and mode != "append":
            fail(f"'separator' belongs to mode 'append', not {mode!r}; remove it or set mode: append")
        if self.create_if_missing and mode not in ("replace", "append"):
            fail(f"'create_if_missing' is for modes 'replace' and 'append', not {mode!r}")
        if self.separator is not None and self.encoding == "base64":
            fail("'separator' is text; it cannot be used with encoding: base64")
        if mode in ("edit", "delete") and self.encoding != "text":
            fail(f"'encoding' has no meaning for mode {mode!r}; remove it")
        for key in self.when or {}:
            used = {s.arg for s in (self.path, self.content) if s is not None}
            if mode == "edit":
                used.add(self.edit_list.arg)
            if key in used:
                fail(f"'when' cannot test {key!r}: that argument carries the path or the content")
        return self

    def _shadow_keys(self, given: set[str]) -> Propose:
        """A shadow rule takes limits and ``ignore``; its paths and bytes come from the server's own run."""
        for key in ("path", *_NOT_FOR_SHADOW):
            if key in given:
                fail(f"{key!r} has no meaning for mode 'shadow' (the server's own code decides); remove it")
        for key, value in SHADOW_DEFAULTS.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)
        return self

    @property
    def edit_list(self) -> Edits:
        """The edit-list shape (the filesystem server's unless the rule says otherwise)."""
        return self.edits or Edits()

    @property
    def new_file_mode(self) -> int:
        """Permissions of a file this rule creates."""
        return NEW_FILE_MODE if self.file_mode is None else self.file_mode

    def allows(self, path: str) -> bool:
        """True if the workspace-relative POSIX path matches one of the rule's globs."""
        return any(glob_match(pattern, path) for pattern in self.globs)
