"""Chip backends: `sim` (a simulated node) and `dcmi` (ctypes binding of libdcmi.so)."""
