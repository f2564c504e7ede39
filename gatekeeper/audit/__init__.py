"""Read-only views of the store: verification and export. Never writes anything."""
