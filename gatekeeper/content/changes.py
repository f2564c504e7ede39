"""What a proposed change does to a file: the mode actually used and the exact resulting bytes.

Pure domain: the caller reads the base (the bytes at the destination now, or None when nothing
is there) and decodes the call's content; this module decides. Every refusal is an
``InvalidInput`` that names what is wrong (for an edit: which edit of how many, and why) and
what to do instead, because the agent that made the call reads it and tries again.

Edits match exact text. Unlike the reference filesystem server, nothing is normalised (no
CRLF → LF, no whitespace-flexible fallback): the reviewer approves the bytes computed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gatekeeper.content import invisible
from gatekeeper.errors import InvalidInput
from gatekeeper.policy import Propose

__all__ = ["Change", "apply", "dry_run_requested"]

_COUNT_CAP = 100
"""Stop counting repeated matches here: the message needs "many", not an exact large number."""
_LAYOUT = frozenset("\t\n\r")
"""Control characters that are part of ordinary text layout, never stripped when re-matching."""


@dataclass(frozen=True)
class Change:
    """The mode a proposal records (a replace of a missing file may become a create) and its result."""

    mode: str
    result: bytes


def apply(rule: Propose, path: str, args: Mapping[str, Any], base: bytes | None, content: bytes | None) -> Change:
    """The change ``rule`` makes to ``base`` (None: nothing at ``path``) with the call's ``args``.

    ``content`` is the call's decoded content for create, replace and append (None otherwise).
    """
    mode = rule.mode
    if mode == "create":
        if base is not None:
            raise InvalidInput(
                f"{path} already exists",
                "pick a new name; this tool only creates new files",
            )
        return Change("create", _needs(content))
    if base is None:
        if mode in ("replace", "append") and rule.create_if_missing:
            return Change("create", _needs(content))
        raise InvalidInput(
            f"{path} does not exist, and this tool only changes an existing file ({mode})",
            "check the path, or use a tool that creates new files",
        )
    if mode == "replace":
        result = _needs(content)
    elif mode == "append":
        result = _appended(base, _needs(content), rule.separator)
    elif mode == "edit":
        result = edited(base, args, rule, path)
    elif mode == "delete":
        return Change("delete", b"")
    else:  # pragma: no cover - Propose validates the mode
        raise InvalidInput(f"unknown mode {mode!r}")
    if result == base:
        raise InvalidInput(
            f"this {mode} leaves {path} exactly as it is ({len(base):,} bytes)",
            "nothing to propose; change the content or the edits",
        )
    return Change(mode, result)


def _needs(content: bytes | None) -> bytes:
    if content is None:  # pragma: no cover - Propose requires content for these modes
        raise InvalidInput("this call carries no content")
    return content


def _appended(base: bytes, content: bytes, separator: str | None) -> bytes:
    """``base`` + ``content``, with ``separator`` between when the file is non-empty and does not end with it."""
    sep = (separator or "").encode("utf-8")
    if sep and base and not base.endswith(sep):
        return base + sep + content
    return base + content


def dry_run_requested(rule: Propose, args: Mapping[str, Any]) -> bool:
    """True when an edit call asks only for a preview (its dry-run argument is ``true``)."""
    key = rule.edit_list.dry_run
    if rule.mode != "edit" or key is None:
        return False
    value = args.get(key)
    if value is None or value is False:
        return False
    if value is True:
        return True
    raise InvalidInput(f"{key} must be true or false, got {type(value).__name__}", f"pass {key}: true or false")


def edited(base: bytes, args: Mapping[str, Any], rule: Propose, path: str) -> bytes:
    """Apply the call's edits in order, each to the text left by the ones before it."""
    shape = rule.edit_list
    try:
        text = base.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{path} is not UTF-8 text (byte {exc.start:,} of {len(base):,}), so text edits cannot apply to it",
            "replace the whole file instead, if a tool for that is allowed",
        ) from None
    edits = args.get(shape.arg)
    if not isinstance(edits, list) or not edits:
        got = "missing" if edits is None else "an empty list" if edits == [] else f"a {type(edits).__name__}"
        raise InvalidInput(
            f"'{shape.arg}' must be a non-empty list of edits, got {got}",
            f"pass {shape.arg}: [{{{shape.old}: ..., {shape.new}: ...}}]",
        )
    total = len(edits)
    for number, item in enumerate(edits, start=1):
        where = f"edit {number} of {total}"
        if not isinstance(item, Mapping):
            raise InvalidInput(
                f"{where} must be an object, got {type(item).__name__}",
                f"pass {{{shape.old}: ..., {shape.new}: ...}}",
            )
        old = _text_key(item, shape.old, where)
        new = _text_key(item, shape.new, where)
        if old == "":
            raise InvalidInput(
                f"{where}: {shape.old} is empty, so it does not say where the change goes",
                f"copy the exact lines to change into {shape.old}",
            )
        text = _replace_once(text, old, new, where, shape.old, path)
    return text.encode("utf-8")


def _text_key(item: Mapping[str, Any], key: str, where: str) -> str:
    if key not in item:
        raise InvalidInput(f"{where}: '{key}' is missing", f"give every edit both '{key}' and its counterpart")
    value = item[key]
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: '{key}' must be a string, got {type(value).__name__}", f"pass {key} as text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{where}: '{key}' contains unpaired surrogate characters and cannot be UTF-8", "send valid Unicode text"
        ) from None
    return value


def _replace_once(text: str, old: str, new: str, where: str, key: str, path: str) -> str:
    first = text.find(old)
    if first < 0:
        raise InvalidInput(f"{where}: {key} not found in {path}", _not_found_hint(text, old, key))
    if text.find(old, first + 1) >= 0:
        count = _count(text, old)
        times = f"{count} times" if count < _COUNT_CAP else f"{_COUNT_CAP} times or more"
        raise InvalidInput(
            f"{where}: {key} found {times} in {path}",
            "add surrounding lines so it matches once",
        )
    return text[:first] + new + text[first + len(old) :]


def _count(text: str, old: str) -> int:
    """Occurrences of ``old`` in ``text``, overlapping ones included, up to ``_COUNT_CAP``."""
    count, at = 0, text.find(old)
    while at >= 0 and count < _COUNT_CAP:
        count += 1
        at = text.find(old, at + 1)
    return count


def _hidden(ch: str) -> bool:
    return ch not in _LAYOUT and invisible.is_invisible(ch)


def _not_found_hint(text: str, old: str, key: str) -> str:
    """What to do when ``old`` is absent; names invisible characters when they are the only difference."""
    kept = [i for i, ch in enumerate(text) if not _hidden(ch)]
    visible_text = "".join(text[i] for i in kept)
    visible_old = "".join(ch for ch in old if not _hidden(ch))
    if visible_old and (visible_text != text or visible_old != old):
        at = visible_text.find(visible_old)
        if at >= 0:
            span = text[kept[at] : kept[at + len(visible_old) - 1] + 1]
            in_file = _names(span)
            in_old = _names(old)
            parts = []
            if in_file:
                parts.append(f"the file has {in_file} inside that text")
            if in_old:
                parts.append(f"{key} has {in_old}")
            return (
                "it would match if invisible characters were ignored: "
                + " and ".join(parts)
                + f"; copy the exact characters into {key} (matching is exact)"
            )
    return f"read the file again and copy the exact current text into {key} (matching is exact, whitespace included)"


def _names(text: str) -> str:
    """The distinct invisible characters in ``text``, as ``U+200B ZERO WIDTH SPACE`` ..."""
    seen: list[str] = []
    for ch in text:
        if _hidden(ch) and ch not in seen:
            seen.append(ch)
    return ", ".join(f"{invisible.code_point(ch)} {invisible.name(ch)}" for ch in seen)
