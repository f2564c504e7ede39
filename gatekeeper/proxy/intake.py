"""Turn a ``propose`` tool call into a proposal draft: the exact destination and the exact bytes.

Everything here is a check a person would want before being asked to review: the path is
inside the workspace and the rule's globs, the content fits ``max_bytes``, and nothing exists
at the destination yet. Any failure is an ``InvalidInput`` whose message says what to change.
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
from gatekeeper.errors import InvalidInput
from gatekeeper.paths import PathRefused, check_existing, normalise_destination
from gatekeeper.policy import Propose, Server
from gatekeeper.store.store import ProposalDraft

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
    raw = _text(rule.path.render(args), "destination path", rule.path.label())
    path = normalise_destination(raw, server.workspace)
    if not rule.allows(path):
        raise PathRefused(
            f"destination {path!r} refused: it is outside what this tool may create",
            f"use a path matching {' or '.join(rule.globs)}",
        )
    return path


def content(rule: Propose, args: dict[str, Any]) -> bytes:
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
    content_size = _json_size(rule.content.render(arguments)) if rule.content is not None else 0
    limit = content_size + ARGUMENT_ALLOWANCE
    size = _json_size(arguments)
    if size > limit:
        raise InvalidInput(
            f"the arguments are {size:,} bytes as JSON, over this tool's limit of {limit:,} bytes "
            f"(the content's {content_size:,} bytes plus {ARGUMENT_ALLOWANCE:,} for everything else)",
            "send only the arguments the tool needs, and put large data in the content",
        )


def arguments_digest(arguments: Any) -> str:
    """sha256 of the canonical JSON of any argument object, even one that cannot be proposed:
    what an audit event keeps instead of the arguments themselves."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256_hex(text.encode("utf-8", "surrogatepass"))


def draft(
    server_name: str,
    server: Server,
    tool: str,
    rule: Propose,
    arguments: Any,
    requester: Requester,
    policy_digest: str,
) -> ProposalDraft:
    """Validate a call and build its draft; the destination must not exist right now."""
    if not isinstance(arguments, dict):
        raise InvalidInput(
            f"the arguments must be a JSON object, got {type(arguments).__name__}", "pass named arguments"
        )
    if rule.mode != "create":
        raise InvalidInput(f"this Gatekeeper cannot propose a {rule.mode} yet", "ask for a create instead")
    path = destination(rule, server, arguments)
    data = content(rule, arguments)
    bound_arguments(rule, arguments)
    check_existing(server.workspace, path)
    return ProposalDraft(
        server=server_name,
        tool=tool,
        arguments=arguments,
        workspace=str(server.workspace),
        path=path,
        content=data,
        encoding=rule.encoding,
        policy_digest=policy_digest,
        expires_at=format_ts(utc_now() + timedelta(seconds=rule.expires_after.total_seconds())),
        client_name=requester.client_name,
        client_version=requester.client_version,
        protocol_version=requester.protocol_version,
        session_id=requester.session_id,
        # Where the root really is now: the committer refuses if it resolves elsewhere by then.
        workspace_real=os.path.realpath(server.workspace),
    )
