"""Turn a ``propose`` tool call into a proposal draft: the exact destination and the exact bytes.

Everything here is a check a person would want before being asked to review: the path is
inside the workspace and the rule's globs, the content fits ``max_bytes``, and for a create
nothing exists at the destination yet. A change (replace, append, edit, delete) reads its base,
the file as it is now, beneath the workspace without following symlinks (commit/reading.py),
and gatekeeper/changes.py computes the result. Any failure is an ``InvalidInput`` whose message
says what to change.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from gatekeeper.canonical import format_ts, sha256_hex, utc_now
from gatekeeper.content import changes
from gatekeeper.content.paths import PathRefused, check_existing, normalise_destination
from gatekeeper.errors import InvalidInput
from gatekeeper.policy import Propose, Server
from gatekeeper.store.store import ProposalDraft
from gatekeeper.workspace.reading import read_at

ARGUMENT_ALLOWANCE = 8 * 1024
"""Room in a proposal's argument object for everything besides the content (path, title, small
extras): the whole object, as canonical JSON, may be the content's own JSON size plus this."""


@dataclass(frozen=True)
class Requester:
    """Who asked: recorded with every proposal."""

    client_name: str | None
    client_version: str | None
    protocol_version: str | None
    session_id: str


def _text(value: Any, what: str, source: str) -> str:
    if value is None:
        raise InvalidInput(f"the {what} is missing: this tool takes it from {source}", f"pass {source}")
    if not isinstance(value, str):
        raise InvalidInput(
            f"the {what} must be a string, got {type(value).__name__} (from {source})", f"pass {source} as a string"
        )
    return value


def destination(rule: Propose, server: Server, args: dict[str, Any]) -> str:
    if rule.path is None:  # a shadow rule: the server's own run decides its paths
        raise InvalidInput(f"a {rule.mode} rule names no destination")
    raw = _text(rule.path.render(args), "destination path", rule.path.label())
    path = normalise_destination(raw, server.workspace)
    if not rule.allows(path):
        raise PathRefused(
            f"destination {path!r} refused: it is outside what this tool may create",
            f"use a path matching {' or '.join(rule.globs)}",
        )
    return path


def content(rule: Propose, args: dict[str, Any]) -> bytes:
    """The call's content as bytes (text as UTF-8, or decoded base64), within ``max_bytes``."""
    if rule.content is None:
        raise InvalidInput(f"a {rule.mode} takes no content")
    text = _text(rule.content.render(args), "content", rule.content.label())
    if rule.encoding == "base64":
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput(
                "the content is not valid base64", "encode the bytes with standard base64 (A-Z a-z 0-9 + /, with =)"
            ) from None
    else:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                "the content contains unpaired surrogate characters and cannot be UTF-8", "send valid Unicode text"
            ) from None
    if len(data) > rule.max_bytes:
        raise InvalidInput(
            f"the content is {len(data):,} bytes, over this tool's limit of {rule.max_bytes:,} bytes",
            "split it into smaller files, or ask the person running Gatekeeper to raise max_bytes",
        )
    return data


def _json_size(value: Any) -> int:
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise InvalidInput(
            "the arguments contain NaN or Infinity, which JSON does not allow", "send finite numbers, or strings"
        ) from None
    return len(text.encode("utf-8", "surrogatepass"))


def bound_arguments(rule: Propose, arguments: dict[str, Any]) -> None:
    """Refuse an argument object much larger than its content: the row that records it is kept forever.

    Call after ``content``: the content is already within ``max_bytes``.
    """
    content_size = _json_size(_payload(rule, arguments))
    limit = content_size + ARGUMENT_ALLOWANCE
    size = _json_size(arguments)
    if size > limit:
        raise InvalidInput(
            f"the arguments are {size:,} bytes as JSON, over this tool's limit of {limit:,} bytes "
            f"(the content's {content_size:,} bytes plus {ARGUMENT_ALLOWANCE:,} for everything else)",
            "send only the arguments the tool needs, and put large data in the content",
        )


def _payload(rule: Propose, arguments: dict[str, Any]) -> Any:
    """The argument that carries the bytes: the content, or an edit's list of edits (bounded here)."""
    if rule.content is not None:
        return rule.content.render(arguments)
    if rule.mode != "edit":
        return None
    edits = arguments.get(rule.edit_list.arg)
    size = _json_size(edits)
    if size > 2 * rule.max_bytes:
        raise InvalidInput(
            f"the edits are {size:,} bytes as JSON, over twice this tool's limit of {rule.max_bytes:,} bytes",
            "send fewer or smaller edits",
        )
    return edits


def arguments_digest(arguments: Any) -> str:
    """sha256 of the canonical JSON of any argument object, even one that cannot be proposed:
    what an audit event keeps instead of the arguments themselves."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256_hex(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Plan:
    """A checked call: where it writes, what is there now (None for a create) and the change."""

    path: str
    base: bytes | None
    change: changes.Change


_KINDS = {
    "folder": ("is a folder, not a file", "name a file inside it instead"),
    "symlink": ("is a symbolic link, which Gatekeeper never follows", "name the file it points to"),
    "other": ("is not a regular file (a FIFO, socket or device)", "name a regular file"),
}


def base_of(rule: Propose, server: Server, path: str) -> bytes | None:
    """The bytes at ``path`` now (None: nothing there), refused if it is not a regular file within the limit."""
    if not server.workspace.is_dir():
        raise InvalidInput(
            f"the workspace {server.workspace} does not exist", "create it, or fix `workspace` in policy.yaml"
        )
    try:
        found = read_at(server.workspace, path, rule.max_bytes)
    except OSError as exc:
        raise InvalidInput(
            f"{path} cannot be read: {exc.strerror or exc}", "check its permissions, or pick another file"
        ) from None
    if found.kind == "missing":
        return None
    if found.kind == "blocked":
        raise PathRefused(
            f"destination {path!r} refused: {found.detail or 'a folder on the way is a symbolic link or a file'}",
            "pick a path whose folders are plain folders",
        )
    if found.kind in _KINDS:
        what, hint = _KINDS[found.kind]
        raise PathRefused(f"destination {path!r} refused: it {what}", hint)
    if found.too_large:
        raise InvalidInput(
            f"{path} is {found.size:,} bytes, over this tool's limit of {rule.max_bytes:,} bytes, "
            "so Gatekeeper will not read it to propose a change",
            "change a smaller file, or ask the person running Gatekeeper to raise max_bytes",
        )
    assert found.data is not None
    return found.data


def _check_when(rule: Propose, arguments: dict[str, Any]) -> None:
    """Refuse a call whose arguments are not the ones this rule is limited to (``when``)."""
    for key, expected in (rule.when or {}).items():
        value = arguments.get(key)
        if value != expected or type(value) is not type(expected):
            got = "it is missing" if key not in arguments else f"got {json.dumps(value, ensure_ascii=False)}"
            raise InvalidInput(
                f"this tool can only be proposed with {key} = {json.dumps(expected, ensure_ascii=False)}; {got}",
                f"call it with {key}: {json.dumps(expected, ensure_ascii=False)}, or ask the person running "
                "Gatekeeper to allow the other form",
            )


def plan(rule: Propose, server: Server, arguments: Any) -> Plan:
    """Check a call against its rule and compute the change it proposes; writes nothing."""
    if not isinstance(arguments, dict):
        raise InvalidInput(
            f"the arguments must be a JSON object, got {type(arguments).__name__}", "pass named arguments"
        )
    _check_when(rule, arguments)
    path = destination(rule, server, arguments)
    data = content(rule, arguments) if rule.content is not None else None
    bound_arguments(rule, arguments)
    if rule.mode == "create":
        check_existing(server.workspace, path)
        base = None
    else:
        base = base_of(rule, server, path)
    change = changes.apply(rule, path, arguments, base, data)
    if len(change.result) > rule.max_bytes:
        raise InvalidInput(
            f"the resulting file would be {len(change.result):,} bytes, over this tool's limit of "
            f"{rule.max_bytes:,} bytes",
            "make the change smaller, or ask the person running Gatekeeper to raise max_bytes",
        )
    return Plan(path, None if change.mode == "create" else base, change)


def draft(
    server_name: str,
    server: Server,
    tool: str,
    rule: Propose,
    arguments: Any,
    requester: Requester,
    policy_digest: str,
) -> ProposalDraft:
    """Validate a call and build its draft: for a create the destination must not exist right now,
    for a change the draft carries the base read now and the result computed from it."""
    checked = plan(rule, server, arguments)
    return ProposalDraft(
        server=server_name,
        tool=tool,
        arguments=arguments,
        workspace=str(server.workspace),
        path=checked.path,
        content=checked.change.result,
        encoding=rule.encoding,
        policy_digest=policy_digest,
        expires_at=format_ts(utc_now() + timedelta(seconds=rule.expires_after.total_seconds())),
        client_name=requester.client_name,
        client_version=requester.client_version,
        protocol_version=requester.protocol_version,
        session_id=requester.session_id,
        # Where the root really is now: the committer refuses if it resolves elsewhere by then.
        workspace_real=os.path.realpath(server.workspace),
        mode=checked.change.mode,
        base=checked.base,
    )
