"""The ground floor both sides import: JSON-RPC and MCP words, line shapes, the capped line framer."""
