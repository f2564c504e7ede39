"""The argument names a ``propose`` rule reads, checked against what its tool takes.

A rule reads a call's arguments by name: ``{arg: body}``, a template's ``args.title`` (or
``args['title']``, ``args.get('title')``), an edit list's ``arg``, the keys of ``when``. A name the
tool does not take is a typo that the policy loader cannot see (it knows no tools) and a call only
reveals when an agent makes it: ``{{ args.titel }}`` fails every call with "'dict object' has no
attribute 'titel'". ``gatekeeper policy check`` lists each server's tools (proxy/probe.py) and
hands their input schemas here: every name a rule reads must be one of the tool's ``properties``.
A schema without properties (or not an object) says nothing, so nothing is checked against it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gatekeeper.policy.messages import suggest
from gatekeeper.policy.model import Policy
from gatekeeper.policy.propose import Propose

__all__ = ["argument_problems", "rule_arguments", "template_arguments", "unlisted_tools"]


def template_arguments(source: str) -> list[str]:
    """The argument names a template reads from ``args``, in order of first use."""
    from jinja2 import nodes

    from gatekeeper.policy.templating import environment

    names: dict[str, None] = {}
    methods: set[int] = set()  # args.get itself is no argument
    for node in environment().parse(source).find_all((nodes.Call, nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Call) and _is_args(getattr(node.node, "node", None)):
            methods.add(id(node.node))
            first = node.args[0] if node.args else None
            if getattr(node.node, "attr", None) == "get" and isinstance(first, nodes.Const):
                names.setdefault(str(first.value))
        elif isinstance(node, nodes.Getattr) and _is_args(node.node) and id(node) not in methods:
            names.setdefault(node.attr)
        elif isinstance(node, nodes.Getitem) and _is_args(node.node) and isinstance(node.arg, nodes.Const):
            names.setdefault(str(node.arg.value))
    return list(names)


def _is_args(node: object) -> bool:
    from jinja2 import nodes

    return isinstance(node, nodes.Name) and node.name == "args"


def rule_arguments(rule: Propose) -> Iterator[tuple[tuple[str, ...], str]]:
    """(key path under the rule, argument name) for every argument the rule reads."""
    for key, source in (("path", rule.path), ("content", rule.content)):
        if source is None:
            continue
        if source.arg is not None:
            yield (key, "arg"), source.arg
        for name in template_arguments(source.template or ""):
            yield (key, "template"), name
    if rule.mode == "edit":
        yield ("edits", "arg"), rule.edit_list.arg
    for name in rule.when or {}:
        yield ("when", name), name


def argument_problems(policy: Policy, listed: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One sentence per argument a rule reads that its listed tool does not take: where, which
    name, the likely one meant, and the names the tool does take. ``listed`` maps a server to its
    tools (name -> listed definition); servers absent from it are not checked."""
    problems = []
    for server, tools in listed.items():
        for tool, rule in policy.servers[server].tools.items():
            schema = tools.get(tool, {}).get("inputSchema")
            known = schema.get("properties") if isinstance(schema, dict) else None
            if rule.propose is None or not isinstance(known, dict) or not known:
                continue
            for key, name in rule_arguments(rule.propose):
                if name not in known:
                    where = policy.where(("servers", server, "tools", tool, "propose", *key))
                    problems.append(
                        f"{where}: the rule for {server}.{tool} reads argument {name!r}, which the tool does not "
                        f"take{suggest(name, list(known))}; its arguments: {', '.join(known)}"
                    )
    return problems


def unlisted_tools(policy: Policy, listed: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A rule for a tool its server does not list: it can never apply (a misspelt tool name?)."""
    return [
        f"{policy.where(('servers', server, 'tools', tool))}: server {server!r} lists no tool {tool!r}"
        f"{suggest(tool, list(tools))}, so this rule never applies"
        for server, tools in listed.items()
        for tool in policy.servers[server].tools
        if tool not in tools
    ]
