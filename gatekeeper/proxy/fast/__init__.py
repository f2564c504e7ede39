"""The raw forwarding path: allowed requests as bytes to a server, answers back, eras rewritten."""
