"""The review page: where an authenticated person approves or rejects exactly one proposal.

It is the only way a decision is made. Never imports the MCP SDK; never writes workspace files.
"""
