"""liblingqu-dcmi.so: the faults of an Atlas A3 node's switches (L1 / L2), through ctypes.

Reference: component/ascend-device-plugin/pkg/device/deviceswitch (library.h, ascend_switch.go).
The library has three calls: `lq_dcmi_init()`, `lq_dcmi_subscribe_fault_event(filter by value,
callback)` (the header leaves the callback out; the reference's dlsym'd pointer takes it as the 2nd
argument) and `lq_dcmi_get_fault_info(list length, out count, event list)`. Symbols resolve lazily
through `DcmiLibrary`, as libdcmi's do, so a library that lacks one costs that call only.

Every method may block in C: the exporter calls them through its call pool under their own key,
so a hung switch call costs the switch its round and never a chip its reads.
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ascend_common.schemas.exporter import Assertion, SwitchFaultData

from dcmi_exporter.backends.base import EventSink, RawSwitchEvent
from dcmi_exporter.backends.dcmi.library import DcmiLibrary
from dcmi_exporter.backends.errors import DcmiError

log = logging.getLogger(__name__)

# The reference finds the library as it finds libdcmi: LD_LIBRARY_PATH, then the loader cache
# (utils.GetDriverLibPath); a bare name makes dlopen search the same places.
DEFAULT_SWITCH_LIB: Final = "liblingqu-dcmi.so"
MAX_FAULT_NUM: Final = 128  # the reference's maxFaultNum: size of the list lq_dcmi_get_fault_info fills
INVALID_NUM: Final = 0xFFFFFFFF  # "no fault id" (a link-down event) and "not a port" in the reference

# pkg/common/constants.go: the peer device of a switch port, by type.
PEER_DEVICE_NAMES: Final[Mapping[int, str]] = {0: "cpu", 1: "npu", 2: "L2"}
PEER_DEVICE_NA: Final = "na"


class LqDcmiEvent(ctypes.Structure):
    """struct LqDcmiEvent (library.h); 112 bytes on LP64."""

    _fields_ = (
        ("eventType", ctypes.c_int),  # HalReportFaultType (the alarm id of the fault code)
        ("subType", ctypes.c_uint),  # the fault id; 0xFFFFFFFF: none
        ("peerportDevice", ctypes.c_ushort),
        ("peerportId", ctypes.c_ushort),
        ("switchChipid", ctypes.c_ushort),
        ("switchPortid", ctypes.c_ushort),
        ("severity", ctypes.c_ubyte),
        ("assertion", ctypes.c_ubyte),
        ("res", ctypes.c_char * 6),
        ("eventSerialNum", ctypes.c_uint),
        ("notifySerialNum", ctypes.c_uint),
        ("alarmRaisedTime", ctypes.c_ulong),
        ("additionalParam", ctypes.c_ubyte * 40),
        ("additionalInfo", ctypes.c_char * 32),
    )


class LqDcmiEventFilter(ctypes.Structure):
    """struct lq_dcmi_event_filter; the reference passes it all zero (every event)."""

    _fields_ = (
        ("filterFlag", ctypes.c_int),
        ("eventTypeId", ctypes.c_int),
        ("eventId", ctypes.c_uint),
        ("severity", ctypes.c_ubyte),
        ("chipId", ctypes.c_uint),
    )


SwitchEventCallback = ctypes.CFUNCTYPE(None, ctypes.POINTER(LqDcmiEvent))

SWITCH_SIGNATURES: Final[Mapping[str, Sequence[Any]]] = {
    "lq_dcmi_init": (),
    "lq_dcmi_subscribe_fault_event": (LqDcmiEventFilter, SwitchEventCallback),
    "lq_dcmi_get_fault_info": (ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(LqDcmiEvent)),
}


# ---- the reference's pure rules (ascend_switch.go) ---------------------------------------------


def is_port_level_fault(switch_port_id: int) -> bool:
    """`isPortLevelFault`: a fault of one port, unless the port id is 0xFFFFFFFF (the whole chip).
    The library's port id is 16 bits wide, so from the library every fault is a port's."""
    return switch_port_id != INVALID_NUM


def peer_device_name(peer_port_device: int) -> str:
    """`getPeerDeviceName`: cpu (0), npu (1), L2 (2), else na."""
    return PEER_DEVICE_NAMES.get(peer_port_device, PEER_DEVICE_NA)


def assemble_fault_code(event_type: int, sub_type: int, peer_port_device: int, switch_port_id: int) -> str:
    """`setExtraFaultInfo`: the code SwitchFaultCode.json lists, `[0x<alarm id>,<fault id|na>,<peer>,na]`."""
    peer = peer_device_name(peer_port_device) if is_port_level_fault(switch_port_id) else PEER_DEVICE_NA
    fault_id = "na" if sub_type == INVALID_NUM else str(sub_type)
    return f"[0x{event_type & 0xFFFFFFFF:08x},{fault_id},{peer},na]"


def assertion_of(raw: int) -> Assertion:
    """The reference treats 0 as a recovery and every other value as an occurrence."""
    return Assertion.RECOVER if raw == 0 else Assertion.OCCUR


def convert_event(event: LqDcmiEvent, now_ms: int) -> SwitchFaultData:
    """`convertFaultEvent`: the library's event as SwitchInfoCfg records it; a zero alarm time is
    the time the event was read, as the reference stamps it."""
    alarm_id = int(event.eventType) & 0xFFFFFFFF
    return SwitchFaultData(
        event_type=alarm_id,
        assembled_fault_code=assemble_fault_code(
            alarm_id, int(event.subType), int(event.peerportDevice), int(event.switchPortid)
        ),
        peer_port_device=int(event.peerportDevice),
        peer_port_id=int(event.peerportId),
        switch_chip_id=int(event.switchChipid),
        switch_port_id=int(event.switchPortid),
        severity=int(event.severity),
        assertion=assertion_of(int(event.assertion)),
        alarm_raised_time=int(event.alarmRaisedTime) or now_ms,
    )


def is_fault_recovered_event(fault: SwitchFaultData, recover: SwitchFaultData) -> bool:
    """`isFaultRecoveredEvent`: `recover` is a recovery and names the same fault as `fault` (the
    alarm, the fault id through the code, the peer and the switch chip and port)."""
    if recover.assertion is not Assertion.RECOVER or recover.assertion is fault.assertion:
        return False

    def identity(d: SwitchFaultData) -> tuple[int, str, int, int, int, int]:
        return (d.event_type, d.assembled_fault_code, d.peer_port_device, d.peer_port_id,
                d.switch_chip_id, d.switch_port_id)  # fmt: skip

    return identity(fault) == identity(recover)


# ---- the library ---------------------------------------------------------------------------------


class SwitchLibrary:
    """One loaded liblingqu-dcmi.so: init, the fault subscription and the full fault list."""

    def __init__(
        self, path: str | os.PathLike[str] = DEFAULT_SWITCH_LIB, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._lib = DcmiLibrary(path, SWITCH_SIGNATURES)
        self._clock = clock
        self._sink: EventSink | None = None
        # The driver keeps the callback's raw pointer for good: a collected thunk would crash it.
        self._callbacks: list[object] = []

    @property
    def path(self) -> str:
        return self._lib.path

    def init(self) -> None:
        """dlopen and `lq_dcmi_init`; DcmiError when either fails (the reference then watches no
        switch: `initDevManager` logs it and goes on)."""
        self._lib.open()
        self._lib.call("lq_dcmi_init")

    def subscribe(self, sink: EventSink) -> None:
        """Register the fault callback with an all-zero filter (every event), as the reference does;
        DcmiError when the library refuses or lacks the call."""
        self._sink = sink
        callback = SwitchEventCallback(self._on_event)
        self._callbacks.append(callback)
        self._lib.call("lq_dcmi_subscribe_fault_event", LqDcmiEventFilter(), callback)

    def faults(self) -> list[SwitchFaultData]:
        """`GetSwitchFaults`: the switch faults the library holds now, recoveries left out."""
        op = "lq_dcmi_get_fault_info"
        count = ctypes.c_uint(0)
        events = (LqDcmiEvent * MAX_FAULT_NUM)()
        self._lib.call(op, MAX_FAULT_NUM, ctypes.byref(count), events)
        if count.value > MAX_FAULT_NUM:
            raise DcmiError(op, message=f"invalid switch fault count {count.value}")
        now_ms = int(self._clock() * 1000)
        faults = [convert_event(events[i], now_ms) for i in range(count.value)]
        return [f for f in faults if f.assertion is not Assertion.RECOVER]

    def _on_event(self, event: ctypes._Pointer[LqDcmiEvent]) -> None:
        """Runs on the driver's thread; must never raise back into C."""
        try:
            data = convert_event(event.contents, int(self._clock() * 1000))
            log.warning(
                "switch fault event",
                extra={"code": data.assembled_fault_code, "assertion": data.assertion.value,
                       "switch_chip_id": data.switch_chip_id, "switch_port_id": data.switch_port_id},
            )  # fmt: skip
            sink = self._sink
            if sink is not None:
                sink(RawSwitchEvent(logic_id=None, data=data))
        except BaseException:
            log.exception("switch fault callback failed; event dropped")

    def close(self) -> None:
        # Late events are dropped; the library stays loaded, as libdcmi does (no unsubscribe call).
        self._sink = None
