"""Tool definition pins: a downstream tool is used only while its definition is the one pinned
(first seen, or accepted by a person with ``gatekeeper policy accept-tools``)."""

from __future__ import annotations

from gatekeeper.canonical import now_ts
from gatekeeper.store import events as ev
from gatekeeper.store.tx import Transactions, Tx


class ToolPins(Transactions):
    """The ``tool_definition`` and ``tool_acceptance`` tables, with their audit events."""

    def observe_tools(self, server: str, definitions: dict[str, tuple[str, str]], actor: str = "proxy") -> set[str]:
        """Record the definitions a downstream server lists; return the tools whose pin matches.

        ``definitions`` maps tool -> (digest, canonical definition JSON). A tool seen for the
        first time is pinned to what it is now; a tool whose definition differs from its pin is
        withheld (absent from the result) until ``accept_tool_changes``, and the change is an event.
        """
        with self.transaction() as tx:
            now = now_ts()
            return {
                tool
                for tool, (digest, definition) in sorted(definitions.items())
                if _observe(tx, server, tool, digest, definition, now, actor)
            }

    def pending_tool_changes(self) -> list[dict[str, str]]:
        """Tools whose newest seen definition is not the one they are pinned to."""
        with self.transaction() as tx:
            rows = tx.all(
                "SELECT d.server, d.tool, d.digest, d.definition, a.digest FROM tool_definition d "
                "JOIN tool_acceptance a ON a.id = (SELECT max(id) FROM tool_acceptance x "
                "WHERE x.server = d.server AND x.tool = d.tool) "
                "WHERE d.last_seen_at = (SELECT max(last_seen_at) FROM tool_definition y "
                "WHERE y.server = d.server AND y.tool = d.tool) AND d.digest != a.digest "
                "ORDER BY d.server, d.tool"
            )
        return [{"server": r[0], "tool": r[1], "digest": r[2], "definition": r[3], "pinned": r[4]} for r in rows]

    def accept_tool_changes(self, actor: str = "cli") -> list[dict[str, str]]:
        """Pin every changed tool to its newest definition; each acceptance is an event."""
        changes = self.pending_tool_changes()
        with self.transaction() as tx:
            now = now_ts()
            for change in changes:
                server, tool = change["server"], change["tool"]
                tx.insert(
                    "tool_acceptance",
                    {"server": server, "tool": tool, "digest": change["digest"], "accepted_at": now, "actor": actor},
                )
                tx.append_event(
                    ev.TOOL_CHANGE_ACCEPTED,
                    actor,
                    {"server": server, "tool": tool, "from": change["pinned"], "to": change["digest"]},
                )
        return changes


def _observe(tx: Tx, server: str, tool: str, digest: str, definition: str, now: str, actor: str) -> bool:
    """Record one seen definition; True when it is the pinned one (a first sighting pins it)."""
    live = tx.first(
        "SELECT digest FROM tool_definition WHERE server = ? AND tool = ? ORDER BY last_seen_at DESC LIMIT 1",
        (server, tool),
    )
    tx.run(
        "INSERT INTO tool_definition (server, tool, digest, definition, first_seen_at, last_seen_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (server, tool, digest) DO UPDATE SET last_seen_at = ?",
        (server, tool, digest, definition, now, now, now),
    )
    pinned = tx.first(
        "SELECT digest FROM tool_acceptance WHERE server = ? AND tool = ? ORDER BY id DESC LIMIT 1", (server, tool)
    )
    if pinned is None:
        pin = {"server": server, "tool": tool, "digest": digest, "accepted_at": now, "actor": actor}
        tx.insert("tool_acceptance", pin)
        tx.append_event(ev.TOOL_PINNED, actor, {"server": server, "tool": tool, "digest": digest})
        return True
    if pinned[0] == digest:
        return True
    if live is None or live[0] != digest:  # a change, not the same change seen again
        tx.append_event(
            ev.TOOL_DEFINITION_CHANGED, actor, {"server": server, "tool": tool, "pinned": pinned[0], "seen": digest}
        )
    return False
