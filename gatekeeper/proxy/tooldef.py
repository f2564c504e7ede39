"""A tool's pinned definition from the raw dict a server listed.

The pin digest has always been ``canonical_json(Tool.model_validate(raw).model_dump(mode="json",
by_alias=True, exclude_none=True))`` (proxy/catalog.py): unknown keys dropped, ``null`` fields
dropped, ``annotations``, ``icons`` and ``execution`` normalised the same way one level down, the
free-form objects (``inputSchema``, ``outputSchema``, ``_meta``) kept as they are, nulls inside
them included. ``tool_definition`` rebuilds that dump for the shapes servers send; a value it is
unsure of (a hint that is not a bool, a title that is not a string, a schema that is not an
object, anything pydantic would coerce or refuse) goes to the SDK's ``Tool`` itself, imported only
then, so the digest stays the one every pin in every store was made with.
tests/test_tool_digest.py holds both ways against each other over real servers' listings.

The negotiated ``version`` does not change the dump in SDK 2.3 (the client validates the listing
against the version's surface, then builds the version-free ``Tool``); it is taken so a revision
that does can be told apart here.
"""

from __future__ import annotations

from typing import Any

from gatekeeper.canonical import canonical_json, sha256_hex
from gatekeeper.proxy.protocol.rpc import Json

_TEXT = ("title", "description")
_OBJECTS = ("inputSchema", "outputSchema", "_meta")  # kept verbatim; only inputSchema is required
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_THEMES = ("light", "dark")
_TASK_SUPPORT = ("forbidden", "optional", "required")


class Unsure(Exception):
    """A value the plain rebuild does not decide: the SDK's model does."""


def tool_dump(raw: Any, version: str | None = None) -> Json:
    """``Tool.model_validate(raw).model_dump(mode="json", by_alias=True, exclude_none=True)``;
    pydantic's ``ValidationError`` (a ``ValueError``) for a tool the SDK would refuse."""
    try:
        return plain_dump(raw)
    except Unsure:
        return oracle_dump(raw)


def tool_definition(raw: Any, version: str | None = None) -> tuple[str, str]:
    """(digest, canonical JSON) of a listed tool, as proxy/catalog.py's ``definition`` gives them."""
    text = canonical_json(tool_dump(raw, version), allow_floats=True)
    return sha256_hex(text.encode("utf-8")), text


def oracle_dump(raw: Any) -> Json:
    """The SDK's own answer (its models: ~0.25 s to import, so only for the unusual)."""
    from mcp_types import Tool

    dumped: Json = Tool.model_validate(raw, by_name=False).model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def plain_dump(raw: Any) -> Json:
    """The dump rebuilt without the SDK; ``Unsure`` where the model must decide."""
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("name"), str)
        or not isinstance(raw.get("inputSchema"), dict)
    ):
        raise Unsure
    out: Json = {"name": raw["name"]}
    for key in _TEXT:
        if (value := _text(raw.get(key))) is not None:
            out[key] = value
    for key in _OBJECTS:
        value = raw.get(key)
        if value is not None:
            if not isinstance(value, dict) or not _json_safe(value):
                raise Unsure
            out[key] = value
    if (execution := raw.get("execution")) is not None:
        out["execution"] = _execution(execution)
    if (icons := raw.get("icons")) is not None:
        if not isinstance(icons, list):
            raise Unsure
        out["icons"] = [_icon(icon) for icon in icons]
    if (annotations := raw.get("annotations")) is not None:
        out["annotations"] = _annotations(annotations)
    return out


def _text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise Unsure
    return value


def _annotations(raw: Any) -> Json:
    if not isinstance(raw, dict):
        raise Unsure
    out: Json = {}
    if (title := _text(raw.get("title"))) is not None:
        out["title"] = title
    for key in _HINTS:
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise Unsure  # "true", 1, "yes": pydantic's lax rules, its to apply
        out[key] = value
    return out


def _icon(raw: Any) -> Json:
    if not isinstance(raw, dict) or not isinstance(raw.get("src"), str):
        raise Unsure
    out: Json = {"src": raw["src"]}
    if (mime := _text(raw.get("mimeType"))) is not None:
        out["mimeType"] = mime
    sizes = raw.get("sizes")
    if sizes is not None:
        if not isinstance(sizes, list) or not all(isinstance(s, str) for s in sizes):
            raise Unsure
        out["sizes"] = sizes
    theme = raw.get("theme")
    if theme is not None:
        if theme not in _THEMES:
            raise Unsure
        out["theme"] = theme
    return out


def _execution(raw: Any) -> Json:
    if not isinstance(raw, dict):
        raise Unsure
    support = raw.get("taskSupport")
    if support is None:
        return {}
    if support not in _TASK_SUPPORT:
        raise Unsure
    return {"taskSupport": support}


def _json_safe(value: Any) -> bool:
    """Plain JSON all the way down with finite floats: anything else is the model's to dump."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return False
        elif not (item is None or isinstance(item, str | int)):
            return False
    return True
