"""Placeholder entry point until this service's issue lands."""

from __future__ import annotations

import sys


def main() -> int:
    print("ascend-device-plugin: not yet implemented", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
