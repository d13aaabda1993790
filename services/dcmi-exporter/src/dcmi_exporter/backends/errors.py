"""DCMI return codes as typed errors (contract section 10)."""

from __future__ import annotations

RC_OK = 0
RC_BAD_PARAMETER = -8001
RC_PERMISSION = -8002
RC_INTERNAL = -8005
RC_TIMEOUT = -8006
RC_INVALID_DEVICE = -8007
RC_NO_SUCH_DEVICE = -8008
RC_NOT_READY = -8012
RC_RESET_FAILED = -8015
RC_BUSY = -8020
RC_NOT_SUPPORTED = -8255


class DcmiError(Exception):
    """A library call returned a non-zero code."""

    code: int = RC_INTERNAL

    def __init__(self, op: str, code: int | None = None, message: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.op = op
        super().__init__(message or f"{op} failed with {self.code}")


class BadParameter(DcmiError):
    code = RC_BAD_PARAMETER


class PermissionDenied(DcmiError):
    code = RC_PERMISSION


class CallTimeout(DcmiError):
    """The call did not return within its timeout; it was abandoned in its thread."""

    code = RC_TIMEOUT


class InvalidDevice(DcmiError):
    code = RC_INVALID_DEVICE


class NoSuchDevice(DcmiError):
    code = RC_NO_SUCH_DEVICE


class CardDropped(DcmiError):
    """The chip answers "not ready": its card dropped off the bus."""

    code = RC_NOT_READY


class ResetFailed(DcmiError):
    code = RC_RESET_FAILED


class Busy(DcmiError):
    code = RC_BUSY


class NotSupported(DcmiError):
    """The driver does not support the call (or does not export the symbol)."""

    code = RC_NOT_SUPPORTED


class SymbolMissing(NotSupported):
    def __init__(self, symbol: str) -> None:
        super().__init__(symbol, message=f"libdcmi does not export {symbol}")


_BY_CODE: dict[int, type[DcmiError]] = {
    cls.code: cls
    for cls in (
        BadParameter,
        PermissionDenied,
        CallTimeout,
        InvalidDevice,
        NoSuchDevice,
        CardDropped,
        ResetFailed,
        Busy,
        NotSupported,
    )
}


def error_for(op: str, code: int) -> DcmiError:
    """The typed error for a return code; unknown codes become a plain DcmiError."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return DcmiError(op, code)
    return cls(op, code)


def check(op: str, code: int) -> None:
    if code != RC_OK:
        raise error_for(op, code)
