"""The interface every chip backend implements.

Methods are synchronous and may block (a real library call can hang after a card drops):
the exporter calls them only from its call pool, with a timeout, and never holds a lock
across one. Errors are raised as `DcmiError` subclasses; per-field failures are returned as
`Reading.error(code)` inside the result so one unsupported field does not hide the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import (
    Assertion,
    Chip,
    ChipDynamic,
    ChipStatic,
    ResetChannel,
    SwitchFaultData,
    UbPorts,
    Vnpu,
)
from ascend_common.schemas.reading import Reading


@dataclass(frozen=True)
class RawFaultEvent:
    """A fault event as the library's subscription callback delivers it."""

    logic_id: int
    code: str  # upper-case hex, no 0x
    severity: int
    assertion: Assertion
    raised_at_ms: int
    name: str = ""


@dataclass(frozen=True)
class RawSwitchEvent:
    """A switch fault event of an A3 node (sim only for now)."""

    logic_id: int | None
    data: SwitchFaultData


EventSink = Callable[[RawFaultEvent | RawSwitchEvent], None]


class Backend(Protocol):
    kind: str  # "sim" or "dcmi"
    profile: str | None

    def init(self) -> None:
        """Initialise the library; raises DcmiError when it cannot be used at all."""

    def version(self) -> Reading[str]: ...

    def discover(self) -> list[ChipAddress]:
        """Every chip on the node (card list, devices per card, logic and phy ids)."""

    def read_static(self, chip: ChipAddress) -> ChipStatic: ...

    def read_dynamic(self, chip: ChipAddress) -> ChipDynamic:
        """Health, codes, telemetry. Raises CardDropped when the chip answers "not ready"."""

    def subscribe(self, sink: EventSink) -> bool:
        """Register the fault-event callback; False when the library has no subscription.

        The sink may be called from any thread (the driver's) and must not block.
        """

    def outband_supported(self, chip: ChipAddress) -> bool: ...

    def reset(self, chip: ChipAddress, channel: ResetChannel) -> None:
        """Start a reset of one chip; completion is observed through `boot_status`."""

    def boot_status(self, chip: ChipAddress) -> int: ...

    def create_vnpu(self, chip: ChipAddress, template: str, vdev_id: int | None, vfg_id: int | None) -> Vnpu: ...

    def destroy_vnpu(self, chip: ChipAddress, vdev_id: int) -> None: ...

    def close(self) -> None: ...


class HangProbe(Protocol):
    """What hung-job detection reads besides the snapshot: network traffic and host CPU time.
    Async, and never in the DCMI call pool: the dcmi backend runs a tool and reads /proc."""

    async def traffic(self, chip: Chip) -> tuple[int, int] | None:
        """(tx, rx) counters of the chip's network; None when they cannot be read this round."""

    async def cpu_seconds(self, pids: Sequence[int]) -> int:
        """CPU seconds (user + system) used so far by the host processes `pids`."""


class UbPortsProbe(Protocol):
    """The 950's ports that are down (`hccn_tool -g -dev_info` / `-port_info` on the dcmi backend).
    Async, outside the DCMI call pool, as HangProbe."""

    async def ub_ports(self, chip: Chip) -> UbPorts:
        """Raises `HccnError` (dcmi) or ValueError when the state cannot be read."""


class RoceLinkProbe(Protocol):
    """The 910's RoCE link state (`hccn_tool -i <phy> -link -g` on the dcmi backend). Async, outside the
    DCMI call pool, as HangProbe."""

    async def link_status(self, chip: Chip) -> str:
        """ "UP", "DOWN" or whatever else the tool says; raises `HccnError` (dcmi) or ValueError when
        the state cannot be read."""
