"""The stdio proxy: one MCP server toward the host, one MCP client per downstream server.

Reads pass through untouched; every write becomes a proposal in the store. Never imports
FastAPI, and never writes a workspace file.

A host line goes ``host/`` (stdio, parse, era, dispatch) -> ``session.py`` -> ``routing.py`` and the
domain beside it (listing, proposing, passthrough, completion, status) -> ``servers/`` (a stdio
child or a ``url`` server); an allowed call may skip to ``fast/`` instead, which writes the raw line
to the server. ``protocol/`` is the ground floor every part imports; imports only run down
(tests/test_layout.py).
"""
