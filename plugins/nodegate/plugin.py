"""pytest plugin entry point (filled in by the foundation work)."""
