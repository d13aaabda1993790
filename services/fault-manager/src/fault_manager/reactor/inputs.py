"""What reaches the fault-manager's reactor, and its one way in.

Every change of the engine's state arrives here as a value, in order: fault events and
snapshots from the exporter's stream (ingest), pod changes, policy changes, hot reset's marks,
operators' isolations through the API, administrators' edits of the device-info ConfigMap.
Nothing calls into the reactor: a part that needs the outcome `ask`s and waits until the
reactor has applied the input, evaluated and published.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ascend_common.pods import SlimPod
from ascend_common.schemas.exporter import ChipList, SwitchFaultData

from fault_manager.policy.engine import Policy
from fault_manager.store import FaultEventRow


@dataclass(frozen=True)
class Snapshot:
    """The exporter's state as a whole, to reconcile with (a new run, a gap, a skipped event)."""

    listing: ChipList
    switch_faults: list[SwitchFaultData] | None  # None: the node could not be read


@dataclass(frozen=True)
class Inventory:
    """Resuming a run whose events we hold: which chips the node has (its codes are ours already)."""

    listing: ChipList


@dataclass(frozen=True)
class SwitchFaultSeen:
    fault: SwitchFaultData
    at_ms: int


@dataclass(frozen=True)
class ChipReachability:
    chip: str
    reachable: bool


@dataclass(frozen=True)
class PodChanged:
    kind: str  # ADDED | MODIFIED | DELETED
    pod: SlimPod


@dataclass(frozen=True)
class PodsListed:
    """The node's pods are listed: the changes they made apply now, not after the settle, so the
    first device-info write holds them (asked after the list's PodChanged inputs, it follows them)."""


@dataclass(frozen=True)
class PolicyChanged:
    policy: Policy


@dataclass(frozen=True)
class ResetMarked:
    """A hot reset runs (or ran) on these chips: they show as `-Recovering` meanwhile."""

    chips: tuple[str, ...]
    on: bool


@dataclass(frozen=True)
class OperatorSeparation:
    """An operator's isolation or release (the API)."""

    chip: str
    on: bool
    by: str


@dataclass(frozen=True)
class WrittenIsolations:
    """The device-info ConfigMap as the writer first read it: which of its ManuallySeparateNPU chips
    we had written (adopted first when the database holds nothing of the node)."""

    data: Mapping[str, str]


@dataclass(frozen=True)
class AdminEdits:
    """The ConfigMap's ManuallySeparateNPU differs from what we wrote: an administrator's edit."""

    written: frozenset[str]
    listed: frozenset[str]


Input = (
    FaultEventRow
    | Snapshot
    | Inventory
    | SwitchFaultSeen
    | ChipReachability
    | PodChanged
    | PodsListed
    | PolicyChanged
    | ResetMarked
    | OperatorSeparation
    | WrittenIsolations
    | AdminEdits
)


@dataclass(frozen=True)
class Queued:
    input: Input
    answer: asyncio.Future[Any] | None  # set once the reactor has applied and published it


class Inbox:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Queued] = asyncio.Queue()

    def put(self, item: Input) -> None:
        self._queue.put_nowait(Queued(item, None))

    async def ask(self, item: Input) -> Any:
        """Put `item` and wait until the reactor has applied it; its answer, or its error."""
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(Queued(item, answer))
        return await answer

    async def next(self, timeout: float) -> Queued | None:  # noqa: ASYNC109 - the reactor's timer
        """The next input, or None after `timeout` seconds without one."""
        if not self._queue.empty():
            return self._queue.get_nowait()
        try:
            async with asyncio.timeout(timeout):
                return await self._queue.get()
        except TimeoutError:
            return None

    def next_nowait(self) -> Queued | None:
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    # ---- the inputs other parts send, typed -------------------------------------------------

    def pod_changed(self, kind: str, pod: SlimPod) -> None:
        self.put(PodChanged(kind, pod))

    async def pods_listed(self) -> None:
        await self.ask(PodsListed())

    async def adopt_policy(self, policy: Policy) -> None:
        await self.ask(PolicyChanged(policy))

    async def set_resetting(self, chips: tuple[str, ...], on: bool) -> None:
        await self.ask(ResetMarked(chips, on))

    async def set_manual(self, chip: str, on: bool, by: str) -> None:
        await self.ask(OperatorSeparation(chip, on, by))

    async def written_isolations(self, data: Mapping[str, str]) -> set[str]:
        written: set[str] = await self.ask(WrittenIsolations(data))
        return written

    async def admin_edits(self, written: set[str], listed: set[str]) -> set[str]:
        """Apply the edits; returns what the ConfigMap now lists of the node's chips."""
        now_listed: set[str] = await self.ask(AdminEdits(frozenset(written), frozenset(listed)))
        return now_listed
