"""Shared vocabulary of the Ascend node stack.

Pure code only: nothing here performs I/O at import time or touches the chip library,
the Kubernetes API or a socket. Services import this package; it imports no service.
"""
