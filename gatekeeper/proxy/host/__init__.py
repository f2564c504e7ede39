"""Toward the host: stdio, each line parsed (the oracle only for unusual ones), eras, dispatch, the session."""
