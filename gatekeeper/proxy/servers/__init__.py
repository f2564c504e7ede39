"""Toward the servers: each downstream as a stdio child or a ``url`` server, started, supervised, spoken to."""
