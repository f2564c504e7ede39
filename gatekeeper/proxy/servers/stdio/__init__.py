"""A stdio child: its process, our JSON-RPC client toward it, the handshake."""
