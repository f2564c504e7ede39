"""Shared test helpers: a real home with a real migrated database, and proposal drafts."""

from __future__ import annotations

import base64
from datetime import timedelta
from pathlib import Path

from gatekeeper.canonical import format_ts, utc_now
from gatekeeper.home import Home
from gatekeeper.store import migrate
from gatekeeper.store.store import ProposalDraft, Store


def make_home(path: Path) -> Home:
    home = Home(path)
    home.create()
    home.ensure_key()
    migrate.upgrade(home.db_path)
    return home


def call_arguments(path: str, content: bytes) -> tuple[dict[str, str], str]:
    """The arguments a real call under a ``{arg: path}``/``{arg: content}`` rule sends, and that rule's
    encoding: UTF-8 text as itself, other bytes as base64 (latin-1 would mangle every non-ASCII byte)."""
    try:
        return {"path": path, "content": content.decode("utf-8")}, "text"
    except UnicodeDecodeError:
        return {"path": path, "content": base64.b64encode(content).decode("ascii")}, "base64"


def draft(
    path: str = "notes/a.md",
    content: bytes = b"hello\n",
    *,
    server: str = "notes",
    tool: str = "create_note",
    arguments: object = None,
    expires_in: float = 3600,
    session_id: str | None = "s1",
) -> ProposalDraft:
    """A draft as the proxy builds it; ``arguments`` defaults to what a real call for these bytes sends."""
    sent, encoding = call_arguments(path, content)
    return ProposalDraft(
        server=server,
        tool=tool,
        arguments=arguments if arguments is not None else sent,
        workspace="/tmp/workspace",
        path=path,
        content=content,
        encoding=encoding,
        policy_digest="0" * 64,
        expires_at=format_ts(utc_now() + timedelta(seconds=expires_in)),
        client_name="pytest",
        client_version="1",
        protocol_version="2025-11-25",
        session_id=session_id,
    )


def add_reviewer(store: Store, name: str = "alice") -> None:
    store.add_reviewer(name, "$argon2id$placeholder-not-a-real-hash")
