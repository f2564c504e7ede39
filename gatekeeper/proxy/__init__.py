"""The stdio proxy: one MCP server toward the host, one MCP client per downstream server.

Reads pass through untouched; every write becomes a proposal in the store. Never imports
FastAPI, and never writes a workspace file.
"""
