"""What the host may see and call: policy x what each server lists x pinned definitions.

A tool reaches the host only if the policy allows or proposes it, its server lists it, and its
definition matches the pin. ``propose`` tools are relabelled so the model knows the call only
proposes, and lose their outputSchema (our result is not the child's).

Tools are the plain wire dicts the listing keeps (proxy/listing.py): exactly what the SDK's
``Tool`` dumps to, so a pin digest is the digest it always was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gatekeeper.canonical import canonical_json, sha256_hex
from gatekeeper.policy import RESERVED_TOOL, Policy, ToolRule
from gatekeeper.proxy.protocol.mcp import Tool

PROPOSE_NOTE = (
    "[Gatekeeper] Calling this tool does not write anything: it records a proposal of the exact "
    "file, and a person must approve it on the review page before the file is created. "
    "The result gives the proposal id; check it later with gatekeeper_proposal_status."
)

SHADOW_NOTE = (
    "[Gatekeeper] Calling this tool changes nothing yet: Gatekeeper runs it in a sandbox and records "
    "every change it would make as one proposal, which a person must approve on the review page before "
    "it is applied. The result gives the proposal id; check it later with gatekeeper_proposal_status."
)

STATUS_TOOL: Tool = {
    "name": RESERVED_TOOL,
    "title": "Gatekeeper: proposal status",
    "description": (
        "Report a Gatekeeper proposal's status (pending, approved, rejected with the reviewer's reason, "
        "committed with the final path, conflict, refused, failed, expired). Read-only."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {"proposal_id": {"type": "string", "description": "The id a proposing call returned."}},
        "required": ["proposal_id"],
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
}


def definition(tool: Tool) -> tuple[str, str]:
    """(digest, canonical JSON) of a tool's whole definition as the server lists it (its wire dict)."""
    text = canonical_json(tool, allow_floats=True)
    return sha256_hex(text.encode("utf-8")), text


@dataclass(frozen=True)
class Route:
    server: str
    tool: str
    rule: ToolRule


@dataclass
class Catalog:
    """The host-facing tools, rebuilt whenever a server (re)starts or says its list changed."""

    policy: Policy
    listed: dict[str, dict[str, Tool]] = field(default_factory=dict)  # server -> tool -> definition
    pinned_ok: dict[str, set[str]] = field(default_factory=dict)  # server -> tools whose pin matches

    def __post_init__(self) -> None:
        self.routes = {
            host: Route(s, t, self.policy.rule(s, t)) for host, (s, t) in self.policy.exposed_tools().items()
        }

    def exposed_of(self, server: str) -> dict[str, Tool]:
        """The tools of ``server`` that the policy lets through (for pinning)."""
        return {
            name: tool
            for name, tool in self.listed.get(server, {}).items()
            if self.policy.rule(server, name).action in ("allow", "propose")
        }

    def route(self, host_name: str) -> Route | None:
        return self.routes.get(host_name) or self.unlisted_routes().get(host_name)

    def unlisted_routes(self) -> dict[str, Route]:
        """The listed tools the policy does not name, on servers with ``unlisted: shadow``: each a
        shadow write. A name the policy's own routes (or Gatekeeper) already use is left out."""
        routes: dict[str, Route] = {}
        for name, server in self.policy.servers.items():
            if server.unlisted != "shadow":
                continue
            for tool in self.listed.get(name, {}):
                host = self.policy.host_name(name, tool)
                if tool not in server.tools and host not in self.routes and host != RESERVED_TOOL:
                    routes[host] = Route(name, tool, self.policy.rule(name, tool))
        return routes

    def state(self, route: Route) -> str:
        """'ok', 'unlisted' (server does not offer it) or 'withheld' (definition changed)."""
        if route.tool not in self.listed.get(route.server, {}):
            return "unlisted"
        if route.tool not in self.pinned_ok.get(route.server, ()):
            return "withheld"
        return "ok"

    def host_tools(self) -> list[Tool]:
        """The listing the host gets: copies, relabelled; the pinned definitions stay as listed."""
        tools: list[Tool] = []
        for host, route in {**self.routes, **self.unlisted_routes()}.items():
            if self.state(route) != "ok":
                continue
            tool: Tool = {**self.listed[route.server][route.tool], "name": host}
            if route.rule.action == "propose":
                shadow = route.rule.propose is not None and route.rule.propose.mode == "shadow"
                own = "\n\n" + tool["description"] if tool.get("description") else ""
                tool["description"] = (SHADOW_NOTE if shadow else PROPOSE_NOTE) + own
                tool.pop("outputSchema", None)
                tool.pop("annotations", None)  # the child's hints describe a write; ours does not write
            tools.append(tool)
        tools.append(STATUS_TOOL)
        return tools
