"""Mutable per-chip state of the simulator; guarded by the backend's lock."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import StrEnum

from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import BOOT_STATUS_READY, ChipProcess, Vnpu

from dcmi_exporter.backends.sim.telemetry import ChipTraits

# Boot status after an in-band reset: (sim seconds since the reset, status). The driver walks
# through intermediate states before it reports 16 (ready).
RESET_STAGES: tuple[tuple[float, int], ...] = ((0.0, 0), (1.0, 3), (2.0, 8), (3.0, BOOT_STATUS_READY))
STUCK_BOOT_STATUS = 3  # a chip whose reset got stuck never leaves early boot


class ResetFailMode(StrEnum):
    ERROR = "error"  # reset() raises
    STUCK = "stuck"  # reset() is accepted but the chip never reaches BOOT_STATUS_READY


@dataclass
class ActiveFault:
    severity: int
    persistent: bool  # survives a successful reset (a hardware fault a reset cannot fix)


@dataclass
class Hang:
    released: threading.Event
    deadline: float | None  # clock.monotonic() at which the hang ends by itself; None: until released


@dataclass
class ResetProgress:
    started: float  # clock.monotonic()
    stuck: bool


@dataclass
class FailNextReset:
    mode: ResetFailMode
    code: int


@dataclass(frozen=True)
class IdleJob:
    """A job that holds the chip and does nothing: its counters stop at `since` (sim seconds)."""

    pids: frozenset[int]
    since: float


@dataclass(frozen=True)
class SimPort:
    """One row of the 950's `hccn_tool -g -dev_info` table, and its `-port_info` port_enable."""

    kind: str  # "UB" or "ETH" (a UBoE bonding port)
    up: bool
    enabled: bool  # wired


@dataclass
class SimChip:
    addr: ChipAddress
    traits: ChipTraits
    codes: dict[str, ActiveFault] = field(default_factory=dict)  # insertion order = report order
    network_down: bool = False
    processes: list[ChipProcess] = field(default_factory=list)
    vnpus: dict[int, Vnpu] = field(default_factory=dict)
    reset: ResetProgress | None = None
    fail_next_reset: FailNextReset | None = None
    hang: Hang | None = None
    idle_job: IdleJob | None = None
    ports: dict[tuple[int, int], SimPort] = field(default_factory=dict)  # (udie, port) -> state; all up if absent

    def boot_status(self, now: float, time_scale: float) -> int:
        progress = self.reset
        if progress is None:
            return BOOT_STATUS_READY
        elapsed = (now - progress.started) * time_scale
        status = RESET_STAGES[0][1]
        for start, value in RESET_STAGES:
            if elapsed >= start:
                status = value
        if progress.stuck:
            return min(status, STUCK_BOOT_STATUS)
        return status

    def health(self) -> int:
        # DCMI health is the worst alarm level: 0 none, 1 minor, 2 major, 3 critical; an
        # event's severity uses the same scale (0 = warning leaves the chip healthy).
        return max((f.severity for f in self.codes.values()), default=0)
