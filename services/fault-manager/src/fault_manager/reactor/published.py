"""What the reactor publishes, for every other part of the fault-manager to read.

The reactor alone writes here, after each step: the verdicts (the board the API streams), the
node's state the device-info ConfigMap is rendered from, and the UpgradeFaultReasons released
since the ConfigMap was last written. Readers never see the engine itself.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from ascend_common.schemas.verdict import ChipVerdict
from ascend_common.superpod import NO_SUPER_POD, SuperPod

from fault_manager.deviceinfo.configmap import SwitchReport, UnwatchedSwitch
from fault_manager.deviceinfo.faultlist import Reason
from fault_manager.policy.engine import Evaluation, Policy
from fault_manager.reactor.chips_in_use import PodUse
from fault_manager.reactor.verdicts import VerdictBoard


@dataclass(frozen=True)
class ChipEntry:
    name: str
    manual: bool  # in ManuallySeparateNPU
    evaluation: Evaluation


@dataclass(frozen=True)
class NodeState:
    policy: Policy
    rtype: str = "Ascend910"
    chips: tuple[ChipEntry, ...] = ()  # every evaluated chip, by logic id
    pods: PodUse = field(default_factory=PodUse)  # what the node's pods hold, for the free list
    hbm_mb: int = 0  # the HBM size of the node's first chip (lowest logic id); 0: unknown
    switch: SwitchReport | UnwatchedSwitch | None = None  # SwitchInfoCfg: A3 and 950 nodes only
    super_pod: SuperPod = NO_SUPER_POD

    @functools.cached_property
    def names(self) -> frozenset[str]:
        return frozenset(chip.name for chip in self.chips)


@dataclass
class Published:
    board: VerdictBoard
    state: NodeState
    inventory: asyncio.Event = field(default_factory=asyncio.Event)  # the node's chips are known
    write_wanted: asyncio.Event = field(default_factory=asyncio.Event)  # the ConfigMap may have to change
    _released: list[tuple[str, tuple[Reason, ...]]] = field(default_factory=list)

    # ---- reads -------------------------------------------------------------------------------

    def verdicts(self) -> dict[str, ChipVerdict]:
        return self.board.current()

    def policy(self) -> Policy:
        return self.state.policy

    def chips(self) -> frozenset[str]:
        return self.state.names

    # ---- released UpgradeFaultReasons, announced after the write that removed them -------------

    def release(self, chip: str, reasons: Sequence[Reason]) -> None:
        self._released.append((chip, tuple(reasons)))

    def released_pending(self) -> int:
        return len(self._released)

    def take_released(self, count: int) -> dict[str, list[Reason]]:
        """The first `count` releases (what a write left out), merged by chip in their order."""
        taken, self._released = self._released[:count], self._released[count:]
        merged: dict[str, list[Reason]] = {}
        for chip, reasons in taken:
            merged.setdefault(chip, []).extend(reasons)
        return merged
