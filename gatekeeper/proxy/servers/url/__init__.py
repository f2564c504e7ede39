"""A ``url`` server: the guarded address, the HTTP connection, the raw carrier for the fast path."""
