"""The scalar values policy.yaml accepts: durations, file modes, sizes, names, globs, paths.

Each is an ``Annotated`` type whose validator turns YAML text into a typed value or fails
with a sentence the person can act on, so the models stay declarations.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StrictInt, StrictStr, ValidationInfo

from gatekeeper.canonical import duration_seconds
from gatekeeper.names import SERVER
from gatekeeper.policy.globs import check_glob
from gatekeeper.policy.messages import describe_value, fail

__all__ = [
    "Bytes",
    "Duration",
    "FileMode",
    "Glob",
    "NonEmpty",
    "ServerName",
    "ToolName",
    "Version",
    "resolve_path",
]

_MAX_DURATION = timedelta(days=3650)  # beyond this timedelta arithmetic is a bug waiting to happen
_MAX_BYTES_CAP = 100 * 1024 * 1024  # a reviewer has to read the content in a browser


def _parse_duration(value: object) -> object:
    if isinstance(value, timedelta):
        return value
    seconds = duration_seconds(value) if isinstance(value, str) else None
    if seconds is None:
        fail(f"expected a duration such as '90s', '30m', '24h', '7d' or '2w', got {describe_value(value)}")
    if seconds <= 0:
        fail("a duration must be longer than zero")
    if seconds > _MAX_DURATION.total_seconds():
        fail("a duration must be at most 3650d")
    return timedelta(seconds=seconds)


def _parse_file_mode(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        fail('expected an octal string such as "0644", got a number (quote it, e.g. file_mode: "0644")')
    if not isinstance(value, str) or not re.fullmatch(r"(?:0o)?[0-7]{3,4}", value):
        fail(f'expected an octal string such as "0644", got {describe_value(value)}')
    mode = int(value.removeprefix("0o"), 8)
    if mode > 0o777:
        fail(f"file mode {value} sets setuid, setgid or sticky bits; use at most 0777")
    return mode


def _check_version(value: object) -> object:
    if isinstance(value, bool) or value != 1:
        fail(f"unsupported policy version {value!r}: this Gatekeeper reads 'version: 1'")
    return 1


def _check_glob(pattern: str) -> str:
    try:
        return check_glob(pattern)
    except ValueError as exc:
        fail(str(exc))


def _check_server_name(name: str) -> str:
    if not SERVER.allows(name):
        fail(f"server name {name!r} {SERVER.rule}")
    return name


def _check_tool_name(name: str) -> str:
    if not name or len(name) > 128 or any(ch.isspace() or not ch.isprintable() for ch in name):
        fail(f"tool name {name!r} must be 1-128 printable characters without spaces")
    return name


Version = Annotated[Literal[1], BeforeValidator(_check_version)]
Duration = Annotated[timedelta, BeforeValidator(_parse_duration)]
FileMode = Annotated[int, BeforeValidator(_parse_file_mode)]
NonEmpty = Annotated[StrictStr, Field(min_length=1)]
Bytes = Annotated[StrictInt, Field(gt=0, le=_MAX_BYTES_CAP)]
Glob = Annotated[StrictStr, AfterValidator(_check_glob)]
ServerName = Annotated[StrictStr, AfterValidator(_check_server_name)]
ToolName = Annotated[StrictStr, AfterValidator(_check_tool_name)]


def resolve_path(value: object, info: ValidationInfo) -> object:
    """Resolve a relative path against the policy file's folder, so any cwd gives the same result."""
    if not isinstance(value, str) or not value:
        return value  # let the field's own type report it
    base = Path((info.context or {}).get("base_dir") or Path.cwd())
    return Path(os.path.normpath(base / os.path.expanduser(value)))
