"""device-plugin: not yet implemented (see the project's issues)."""
