"""fault-manager: not yet implemented (see the project's issues)."""
