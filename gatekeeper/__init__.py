"""Gatekeeper: an approval-gated write proxy for the Model Context Protocol."""

__version__ = "0.1.0"
