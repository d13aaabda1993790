"""The `dcmi` backend: a ctypes binding of Huawei's libdcmi.so (contract section 10)."""

from dcmi_exporter.backends.dcmi.backend import DcmiBackend, format_code
from dcmi_exporter.backends.dcmi.library import DEFAULT_LIB_PATH, DcmiLibrary

__all__ = ["DEFAULT_LIB_PATH", "DcmiBackend", "DcmiLibrary", "format_code"]
