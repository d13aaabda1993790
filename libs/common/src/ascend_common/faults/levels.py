"""Fault levels of a chip and of a switch (contract sections 6 and 7).

The level names are wire values: they appear verbatim in the device-info ConfigMap
(`fault_level`, `fault_handling`, UpgradeFaultReason) and in faultCustomization.json.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum, StrEnum


class FaultLevel(StrEnum):
    """A chip's fault level; members are listed most serious first.

    Ordering operators compare by severity (`SEPARATE_NPU > RESTART_NPU`), not
    alphabetically as a plain `str` would, so `max()` and `sorted()` do the right thing.
    A plain string operand is accepted when it names a level; anything else is a TypeError,
    because silently falling back to string order would invert verdicts.
    """

    MANUALLY_SEPARATE_NPU = "ManuallySeparateNPU"
    SEPARATE_NPU = "SeparateNPU"
    PRE_SEPARATE_NPU = "PreSeparateNPU"
    RESTART_NPU = "RestartNPU"
    FREE_RESTART_NPU = "FreeRestartNPU"
    RESTART_BUSINESS = "RestartBusiness"
    RESTART_REQUEST = "RestartRequest"
    SUB_HEALTH_FAULT = "SubHealthFault"
    NOT_HANDLE_FAULT = "NotHandleFault"
    NORMAL_NPU = "NormalNPU"

    @property
    def rank(self) -> int:
        """Severity rank: NormalNPU is 0, ManuallySeparateNPU the highest."""
        return _RANK[self]

    def is_more_serious_than(self, other: FaultLevel) -> bool:
        return self.rank > other.rank

    def __lt__(self, other: str, /) -> bool:
        return self.rank < _as_level(other).rank

    def __le__(self, other: str, /) -> bool:
        return self.rank <= _as_level(other).rank

    def __gt__(self, other: str, /) -> bool:
        return self.rank > _as_level(other).rank

    def __ge__(self, other: str, /) -> bool:
        return self.rank >= _as_level(other).rank


# Declaration order is most serious first; rank counts up from the least serious.
_RANK: dict[FaultLevel, int] = {level: len(FaultLevel) - 1 - i for i, level in enumerate(FaultLevel)}


def _as_level(value: object) -> FaultLevel:
    if isinstance(value, FaultLevel):
        return value
    if isinstance(value, str):
        try:
            return FaultLevel(value)
        except ValueError:
            pass
    raise TypeError(f"cannot compare a fault level with {value!r}")


def most_serious(levels: Iterable[FaultLevel]) -> FaultLevel:
    """The most serious of `levels`; NormalNPU when there are none (a chip with no faults)."""
    return max(levels, key=_RANK.__getitem__, default=FaultLevel.NORMAL_NPU)


class SwitchFaultLevel(IntEnum):
    """Level of an A3/950 switch fault (SwitchFaultCode.json); the value is the wire number."""

    NOT_HANDLE = 0
    SUB_HEALTH = 1
    RESTART_REQUEST = 2
    PRE_SEPARATE = 3
    SEPARATE = 4

    @property
    def level_name(self) -> str:
        """The `FaultLevel` string of SwitchInfoCfg."""
        return _SWITCH_LEVEL_NAME[self]

    @property
    def node_status(self) -> str:
        """The `NodeStatus` string of SwitchInfoCfg for a node whose worst switch fault is this level."""
        return _SWITCH_NODE_STATUS[self]


_SWITCH_LEVEL_NAME: dict[SwitchFaultLevel, str] = {
    SwitchFaultLevel.NOT_HANDLE: "NotHandle",
    SwitchFaultLevel.SUB_HEALTH: "SubHealthFault",
    SwitchFaultLevel.RESTART_REQUEST: "RestartRequest",
    SwitchFaultLevel.PRE_SEPARATE: "PreSeparate",
    SwitchFaultLevel.SEPARATE: "Separate",
}

# RestartRequest maps to UnHealthy, not to a status of its own: the contract lists five
# statuses for five levels and the reference has no "RestartRequest" node status.
_SWITCH_NODE_STATUS: dict[SwitchFaultLevel, str] = {
    SwitchFaultLevel.NOT_HANDLE: "Healthy",
    SwitchFaultLevel.SUB_HEALTH: "SubHealthy",
    SwitchFaultLevel.RESTART_REQUEST: "UnHealthy",
    SwitchFaultLevel.PRE_SEPARATE: "PreSeparate",
    SwitchFaultLevel.SEPARATE: "UnHealthy",
}


def most_serious_switch(levels: Iterable[SwitchFaultLevel]) -> SwitchFaultLevel | None:
    """The most serious switch level, or None when there is no switch fault at all
    (SwitchInfoCfg then writes an empty `FaultLevel`)."""
    return max(levels, default=None)
