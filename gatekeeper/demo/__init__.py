"""The bundled demo: a small MCP notes server to put behind Gatekeeper."""
