"""A value read from the chip library, with how the read went.

The library answers per field: a value, an error code, or "not supported" on this driver.
Consumers need to tell "0" from "could not read", so every field carries its status.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")

RC_NOT_SUPPORTED = -8255


class ReadStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    UNSUPPORTED = "unsupported"


class Reading(BaseModel, Generic[T]):
    model_config = ConfigDict(frozen=True)

    status: ReadStatus
    value: T | None = None
    code: int | None = None  # the library's return code when status is not ok

    @classmethod
    def ok(cls, value: T) -> Reading[T]:
        return cls(status=ReadStatus.OK, value=value)

    @classmethod
    def error(cls, code: int) -> Reading[T]:
        status = ReadStatus.UNSUPPORTED if code == RC_NOT_SUPPORTED else ReadStatus.ERROR
        return cls(status=status, code=code)

    @property
    def is_ok(self) -> bool:
        return self.status is ReadStatus.OK
