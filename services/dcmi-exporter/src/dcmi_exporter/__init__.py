"""dcmi-exporter: the only process that touches the chip library."""

__version__ = "0.1.0"
