"""Validation and formatting of the codes the simulator injects.

Kept apart from the backend so the scenario loader validates a file with exactly the rules
the backend applies at run time: a scenario that loads is a scenario that runs.
"""

from __future__ import annotations

import re
from typing import Final

from ascend_common.schemas.exporter import Assertion

LINK_DOWN_SEVERITY: Final = 1  # minor: the reference's table lists it as NotHandleFault
MAX_CODE_DIGITS: Final = 9  # some codes exceed 32 bits (contract section 7)
MAX_ERROR_CODES: Final = 128  # dcmi_get_device_errorcode_v2 returns at most 128 codes
MAX_PROCESSES: Final = 32  # dcmi_get_device_resource_info fills at most 32 entries
SWITCH_POSITIONS: Final = ("cpu", "npu", "L2", "na")

_CODE = re.compile(r"^(?:0[xX])?([0-9a-fA-F]{1,9})$")


def normalise_code(code: str | int) -> str:
    """Upper-case hex without `0x` or leading zeros, as the library's uint codes print.

    Policy tables match codes as strings, so "0x80e01801", "80E01801" and 0x80E01801 must
    all become "80E01801".
    """
    if isinstance(code, bool):
        raise ValueError(f"invalid fault code {code!r}")
    if isinstance(code, int):
        value = code
    else:
        m = _CODE.match(code.strip())
        if m is None:
            raise ValueError(f"invalid fault code {code!r}: expected 1-{MAX_CODE_DIGITS} hex digits")
        value = int(m.group(1), 16)
    if not 0 < value < 16**MAX_CODE_DIGITS:
        raise ValueError(f"invalid fault code {code!r}: must be 1..{16**MAX_CODE_DIGITS - 1:X}")
    return f"{value:X}"


def check_severity(severity: int) -> int:
    if isinstance(severity, bool) or not isinstance(severity, int) or not 0 <= severity <= 3:
        raise ValueError(f"invalid severity {severity!r}: expected 0 (warning) .. 3 (critical)")
    return severity


def parse_assertion(assertion: Assertion | str) -> Assertion:
    try:
        return Assertion(assertion)
    except ValueError:
        raise ValueError(f"invalid assertion {assertion!r}: expected one of {[a.value for a in Assertion]}") from None


def parse_alarm_id(alarm_id: int | str) -> int:
    if isinstance(alarm_id, bool):
        raise ValueError(f"invalid switch alarm id {alarm_id!r}")
    if isinstance(alarm_id, str):
        text = alarm_id.strip().lower().removeprefix("0x")
        if not re.fullmatch(r"[0-9a-f]{1,8}", text):
            raise ValueError(f"invalid switch alarm id {alarm_id!r}: expected up to 8 hex digits")
        value = int(text, 16)
    else:
        value = alarm_id
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"invalid switch alarm id {alarm_id!r}: must fit 32 bits")
    return value


def assemble_switch_code(alarm_id: int | str, fault_id: int | None, position: str) -> str:
    """The reference's SwitchFaultCode.json format: `[0x<alarm id 8 hex>,<fault id|na>,<position>,na]`."""
    if position not in SWITCH_POSITIONS:
        raise ValueError(f"invalid switch fault position {position!r}: expected one of {list(SWITCH_POSITIONS)}")
    if fault_id is not None and (isinstance(fault_id, bool) or fault_id < 0):
        raise ValueError(f"invalid switch fault id {fault_id!r}")
    fault = "na" if fault_id is None else str(fault_id)
    return f"[0x{parse_alarm_id(alarm_id):08x},{fault},{position},na]"
