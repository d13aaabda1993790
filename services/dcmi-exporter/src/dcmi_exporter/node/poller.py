"""Keeps the snapshot: one read loop per chip, plus the library's fault-event subscription.

Each chip has its own loop so that a chip whose call hangs delays nobody else. Events from
the subscription arrive on a driver thread and hop to the event loop; a code they report
is trusted over a poll that started before it, so the two sources never double or undo an
occurrence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.chips import ChipAddress
from ascend_common.clock import Clock
from ascend_common.faults.codes import RESET_FINISH_CODE
from ascend_common.schemas.exporter import (
    BOOT_STATUS_READY,
    Assertion,
    Chip,
    ChipDynamic,
    ChipState,
    ChipStatic,
    EventSource,
    EventType,
    FaultEventData,
    NodeInfo,
    SubscriptionState,
    SwitchFaultData,
    UbPorts,
)
from ascend_common.schemas.reading import Reading

from dcmi_exporter.backends.base import Backend, RawFaultEvent, RawSwitchEvent
from dcmi_exporter.backends.errors import CardDropped, DcmiError
from dcmi_exporter.node.calls import CallGuard
from dcmi_exporter.node.events import EventLog
from dcmi_exporter.node.snapshot import (
    Snapshot,
    change_of,
    changed,
    chip_discovered,
    chip_dropped,
    chip_ok,
    chip_unknown,
    codes_of,
    merge_codes,
    placeholder_static,
    with_codes,
    with_ub_ports,
)

log = logging.getLogger(__name__)
NODE_KEY = "node"
STATIC_RETRY_S = 30.0


def chip_key(logic_id: int) -> tuple[str, int]:
    return ("chip", logic_id)


def next_tick(origin: float, period: float, now: float) -> float:
    """The first tick after `now` of the grid of ticks `period` apart from `origin`."""
    return origin + (math.floor((now - origin) / period) + 1) * period


class ChipPoller:
    def __init__(
        self,
        backend: Backend,
        guard: CallGuard,
        events: EventLog,
        clock: Clock,
        poll_period: float,
        tasks: TaskScope,
    ) -> None:
        self.backend = backend
        self.guard = guard
        self.events = events
        self.clock = clock
        self.poll_period = poll_period
        self._addr: dict[int, ChipAddress] = {}
        self._static: dict[int, ChipStatic] = {}
        self._static_read_at: dict[int, float] = {}
        self._chips: dict[int, Chip] = {}
        self._read_started: dict[int, float] = {}
        # (logic id, code) -> monotonic time the subscription last changed it
        self._sub_touched: dict[tuple[int, str], float] = {}
        self._switch: dict[str, SwitchFaultData] = {}
        # Codes the exporter raises itself (hang detection, the 950's UB codes), per chip: no poll reports them, so
        # each poll's list gets them back instead of clearing them.
        self._derived: dict[int, list[str]] = {}
        # The 950's port state (UB codes' task): no DCMI read has it, so each read gets it back.
        self._ub_ports: dict[int, Reading[UbPorts]] = {}
        # Resets noticed per chip (a read short of boot-ready, a reset job done, the driver's reset-finish
        # event): the lost-event rule compares it between rounds, so a reset that began and ended
        # between two of them is not missed.
        self._reset_epochs: dict[int, int] = {}
        self._wake: dict[int, asyncio.Event] = {}
        self._tasks = tasks
        self._loop: asyncio.AbstractEventLoop | None = None
        self._first_read: set[int] = set()
        self._stopping = False
        self._tick_origin = 0.0  # loop time of the poll grid's first tick
        self.discovered = asyncio.Event()
        # Set once every discovered chip was read (at once on a node with none): until then the
        # snapshot lists no chip, or chips nobody may trust, and no client may be told it.
        self.read_once = asyncio.Event()
        self._nic_addresses: dict[str, list[str]] | None = None  # NodeInfo.nic_addresses (nics.py)
        self._npu_nics: dict[int, list[str]] | None = None  # NodeInfo.npu_nics (nics.py)
        self.snapshot = Snapshot(node=self._node(Reading[str].error(-8005), SubscriptionState.POLLING, ready=False))

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._tasks.spawn(self._discover_loop(), "discover")  # returns once the chips are known

    async def stop(self) -> None:
        self._stopping = True
        await self._tasks.stop()

    async def _discover_loop(self) -> None:
        backoff = self.poll_period
        while True:
            try:
                await self._discover()
                return
            except DcmiError as exc:
                log.error("chip discovery failed; retrying", extra={"code": exc.code, "error": str(exc)})
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    async def _discover(self) -> None:
        await self.guard.call(NODE_KEY, self.backend.init)
        version = await self.guard.call(NODE_KEY, self.backend.version)
        addresses = await self.guard.call(NODE_KEY, self.backend.discover)
        for addr in sorted(addresses):
            self._addr[addr.logic_id] = addr
            self._wake[addr.logic_id] = asyncio.Event()
        await asyncio.gather(*(self._read_static(logic) for logic in self._addr))
        for logic, addr in self._addr.items():
            self._chips[logic] = chip_discovered(addr, self._static[logic])
        live = await self.guard.call(NODE_KEY, lambda: self.backend.subscribe(self._sink))
        subscription = SubscriptionState.LIVE if live else SubscriptionState.POLLING
        self.snapshot = Snapshot.build(self._node(version, subscription, ready=False), self._chips)
        self.discovered.set()
        self._rebuild()  # a node without chips is whole now: none is left to read
        log.info(
            "chips discovered",
            extra={"chips": len(self._addr), "subscription": subscription.value, "backend": self.backend.kind},
        )
        self._tick_origin = asyncio.get_running_loop().time()
        for logic in self._addr:
            self._tasks.essential(self._chip_loop(logic), f"chip-{logic}")

    def _node(self, version: Reading[str], subscription: SubscriptionState, ready: bool) -> NodeInfo:
        now = self.clock.now()
        return NodeInfo(
            backend=self.backend.kind,
            profile=self.backend.profile,
            run_id=self.events.run_id,
            dcmi_version=version,
            card_count=0,
            chip_count=0,
            chips_by_state={},
            subscription=subscription,
            poll_period_s=self.poll_period,
            started_at=now,
            updated_at=now,
            last_event_id=None,
            ready=ready,
            nic_addresses=self._nic_addresses,
            npu_nics=self._npu_nics,
        )

    # ---- reads -----------------------------------------------------------------------------

    @property
    def addresses(self) -> dict[int, ChipAddress]:
        return dict(self._addr)

    async def _read_static(self, logic: int) -> None:
        addr = self._addr[logic]
        try:
            static = await self.guard.call(chip_key(logic), lambda: self.backend.read_static(addr))
        except DcmiError as exc:
            static = self._static.get(logic) or placeholder_static(exc.code)
        self._static[logic] = static
        self._static_read_at[logic] = time.monotonic()

    def _static_incomplete(self, logic: int) -> bool:
        static = self._static[logic]
        return not (static.chip_name.is_ok and static.aicore.is_ok)

    async def _chip_loop(self, logic: int) -> None:
        wake = self._wake[logic]
        loop = asyncio.get_running_loop()
        while not self._stopping:
            try:
                await self.read_chip(logic)
            except Exception:  # a bug in one read must not stop the chip's loop
                log.exception("chip read failed", extra={"logic_id": logic})
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(self.next_tick(loop.time())):
                    await wake.wait()
            wake.clear()

    def next_tick(self, now: float) -> float:
        """The poll grid's first tick after `now` (loop time). Every chip's loop waits for the same
        ticks, so one wake-up of the process starts every chip's read. Waiting a period from the end
        of each chip's own read, as before, let the chips drift apart until each cost a wake-up (and
        a thread's) of its own."""
        return next_tick(self._tick_origin, self.poll_period, now)

    def refresh_soon(self, logic: int) -> None:
        """Re-read a chip now instead of at its next period (after an event or a command)."""
        if (wake := self._wake.get(logic)) is not None:
            wake.set()

    async def read_chip(self, logic: int) -> None:
        if self._static_incomplete(logic) and time.monotonic() - self._static_read_at[logic] > STATIC_RETRY_S:
            await self._read_static(logic)
        addr = self._addr[logic]
        started = time.monotonic()
        result: ChipDynamic | DcmiError
        try:
            result = await self.guard.call(chip_key(logic), lambda: self.backend.read_dynamic(addr))
        except DcmiError as exc:
            result = exc
        self._apply_read(logic, started, result)

    def _apply_read(self, logic: int, started: float, result: ChipDynamic | DcmiError) -> None:
        if started < self._read_started.get(logic, 0.0):
            return  # a newer read of this chip was already applied
        self._read_started[logic] = started
        prev = self._chips[logic]
        now = self.clock.now()
        if isinstance(result, CardDropped):
            new = chip_dropped(prev, now)
        elif isinstance(result, DcmiError):
            if prev.state is not ChipState.UNKNOWN or prev.dynamic is not None:
                log.warning("chip did not answer", extra={"logic_id": logic, "chip": prev.name, "code": result.code})
            new = chip_unknown(prev)
        else:
            new = chip_ok(self._addr[logic], self._static[logic], result, now)
            if _booting(new) and not _booting(prev):
                self.mark_reset(logic)
            codes = merge_codes(codes_of(prev), codes_of(new), self._touched_since(logic, started))
            codes += [c for c in self._derived.get(logic, ()) if c not in codes]
            new = with_ub_ports(with_codes(new, codes), self._ub_ports.get(logic))
        self._first_read.add(logic)
        self._commit(prev, new)

    def _touched_since(self, logic: int, started: float) -> set[str]:
        return {code for (chip, code), at in self._sub_touched.items() if chip == logic and at >= started}

    # ---- commits and events ----------------------------------------------------------------

    def set_derived(self, logic: int, fault: FaultEventData) -> None:
        """Raise (OCCUR) or clear (RECOVER) a code the exporter derives itself, and publish it.
        The caller checks that the chip is OK: an UNKNOWN chip's codes publish no events."""
        derived = self._derived.setdefault(logic, [])
        occur = fault.assertion is Assertion.OCCUR
        if occur == (fault.code in derived):
            return  # already so
        if occur:
            derived.append(fault.code)
        else:
            derived.remove(fault.code)
        prev = self._chips.get(logic)
        if prev is None:
            return
        codes = [c for c in codes_of(prev) if c != fault.code] + ([fault.code] if occur else [])
        self._commit(prev, with_codes(prev, codes), fault)

    def derived(self, logic: int) -> tuple[str, ...]:
        """The codes the exporter raised itself on this chip (hang, UB)."""
        return tuple(self._derived.get(logic, ()))

    def mark_reset(self, logic: int) -> None:
        """Note that the chip was reset (or is being reset): its lost events get looked for once it is back."""
        self._reset_epochs[logic] = self._reset_epochs.get(logic, 0) + 1

    def reset_epoch(self, logic: int) -> int:
        """How many resets of the chip this exporter noticed; only its changes mean anything."""
        return self._reset_epochs.get(logic, 0)

    def set_ub_ports(self, logic: int, ports: Reading[UbPorts]) -> None:
        """Record a chip's port state; it changes no health, so it publishes no event."""
        self._ub_ports[logic] = ports
        prev = self._chips.get(logic)
        if prev is None or prev.dynamic is None or prev.dynamic.ub_ports == ports:
            return
        self._chips[logic] = with_ub_ports(prev, ports)
        self._rebuild()

    def _commit(self, prev: Chip, new: Chip, origin: FaultEventData | None = None) -> None:
        """Replace one chip, publish what changed, then publish the snapshot that includes it.

        `origin` describes the library event behind the change; without it the change came
        from a poll and the events say so (no severity: polling does not report one).
        """
        now = self.clock.now()
        if new.state is not ChipState.UNKNOWN:
            before, after = codes_of(prev), codes_of(new)
            for code in before:
                if code not in after:
                    self._publish_fault(new, self._fault_data(code, Assertion.RECOVER, origin, now))
            for code in after:
                if code not in before:
                    self._publish_fault(new, self._fault_data(code, Assertion.OCCUR, origin, now))
        if changed(prev, new):
            self.events.publish(
                EventType.CHIP, now, logic_id=new.logic_id, phy_id=new.phy_id, chip=new.name, change=change_of(new)
            )
        self._chips[new.logic_id] = new
        self._rebuild()

    @staticmethod
    def _fault_data(code: str, assertion: Assertion, origin: FaultEventData | None, now: float) -> FaultEventData:
        if origin is not None and origin.code == code:
            return origin
        return FaultEventData(
            code=code, assertion=assertion, severity=None, source=EventSource.POLL, raised_at_ms=int(now * 1000)
        )

    def _publish_fault(self, chip: Chip, fault: FaultEventData) -> None:
        self.events.publish(
            EventType.FAULT, self.clock.now(), logic_id=chip.logic_id, phy_id=chip.phy_id, chip=chip.name, fault=fault
        )

    def _rebuild(self) -> None:
        ready = self.discovered.is_set() and len(self._first_read) == len(self._addr)
        if ready:
            self.read_once.set()
        self.snapshot = Snapshot.build(
            self.snapshot.node,
            self._chips,
            updated_at=self.clock.now(),
            last_event_id=self.events.head_id,
            switch_faults=list(self._switch.values()),
            ready=ready,
        )

    def set_nic_addresses(self, addresses: dict[str, list[str]] | None) -> None:
        """The mapped host NICs' addresses, into the node; a change is a `node` event, so that the
        plugin re-renders the levelList it builds from them without waiting for a re-sync."""
        if addresses == self._nic_addresses:
            return
        self._nic_addresses = addresses
        snap = self.snapshot
        self.snapshot = Snapshot(
            node=snap.node.model_copy(update={"nic_addresses": addresses}), chips=snap.chips, by_logic=snap.by_logic
        )
        self.publish(EventType.NODE)

    def set_npu_nics(self, npu_nics: dict[int, list[str]] | None) -> None:
        """The mapping's npuId -> NIC names, into the node (read once at start; no event, as above)."""
        if npu_nics == self._npu_nics:
            return
        self._npu_nics = npu_nics
        snap = self.snapshot
        self.snapshot = Snapshot(
            node=snap.node.model_copy(update={"npu_nics": npu_nics}), chips=snap.chips, by_logic=snap.by_logic
        )

    def publish(self, type_: EventType, **fields: Any) -> None:
        """Publish an event that changes no chip (jobs, vNPUs) and refresh the snapshot's id."""
        self.events.publish(type_, self.clock.now(), **fields)
        self._rebuild()

    # ---- subscription ----------------------------------------------------------------------

    def _sink(self, raw: RawFaultEvent | RawSwitchEvent) -> None:
        """Called by the library on its own thread: hand over to the event loop, never block."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed between the check and the call
            loop.call_soon_threadsafe(self._on_raw, raw)

    def _on_raw(self, raw: RawFaultEvent | RawSwitchEvent) -> None:
        if isinstance(raw, RawSwitchEvent):
            self._on_switch(raw)
            return
        chip = self._chips.get(raw.logic_id)
        if chip is None:
            log.warning("fault event for an unknown chip dropped", extra={"logic_id": raw.logic_id, "code": raw.code})
            return
        self._sub_touched[(raw.logic_id, raw.code)] = time.monotonic()
        if raw.code == RESET_FINISH_CODE:
            self.mark_reset(raw.logic_id)  # as the reference's SetDeviceInit; the event is published as any other
        fault = FaultEventData(
            code=raw.code,
            assertion=raw.assertion,
            severity=raw.severity,
            source=EventSource.SUBSCRIPTION,
            raised_at_ms=raw.raised_at_ms,
            name=raw.name,
        )
        codes = codes_of(chip)
        if raw.assertion is Assertion.ONCE:
            self._publish_fault(chip, fault)
            self._rebuild()
            return
        if raw.assertion is Assertion.OCCUR and raw.code not in codes:
            new = with_codes(chip, [*codes, raw.code])
        elif raw.assertion is Assertion.RECOVER and raw.code in codes:
            new = with_codes(chip, [c for c in codes if c != raw.code])
            derived = self._derived.get(raw.logic_id)
            if derived is not None and raw.code in derived:
                # A code we raised for a lost event, now recovered by the driver: its word is newer
                # (the task that raised it raises it again if its own reading still says so).
                derived.remove(raw.code)
        else:
            # A repeated occur or a recover of an absent code changes nothing and is not an
            # occurrence of its own: the library re-sends on re-subscription.
            return
        self._commit(chip, new, fault)
        self.refresh_soon(raw.logic_id)

    def _on_switch(self, raw: RawSwitchEvent) -> None:
        data = raw.data
        key = switch_key(data)
        if data.assertion is Assertion.RECOVER:
            self._switch.pop(key, None)
        elif data.assertion is Assertion.OCCUR:
            self._switch[key] = data
        self.events.publish(EventType.SWITCH_FAULT, self.clock.now(), logic_id=raw.logic_id, switch_fault=data)
        self._rebuild()

    # ---- helpers for the API ---------------------------------------------------------------

    def address(self, logic: int) -> ChipAddress | None:
        return self._addr.get(logic)

    def on_loop(self, fn: Callable[[], None]) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(fn)

    # ---- switch faults from a full query (A3, liblingqu-dcmi.so) ----------------------------

    def switch_sink(self, raw: RawFaultEvent | RawSwitchEvent) -> None:
        """The sink a switch library's callback calls, on the driver's thread."""
        self._sink(raw)

    @property
    def switch_faults(self) -> list[SwitchFaultData]:
        return list(self._switch.values())

    def replace_switch_faults(self, current: list[SwitchFaultData]) -> None:
        """A full query's answer becomes the active set, as the reference's `SetSwitchFaultCode`:
        a fault no longer listed publishes its recovery and a new one its occurrence, so the
        fault-manager follows the same stream it follows for the callback's events."""
        listed = {switch_key(d): d for d in current}
        for key, data in list(self._switch.items()):
            if key not in listed:
                self._on_switch(RawSwitchEvent(None, data.model_copy(update={"assertion": Assertion.RECOVER})))
        for key, data in listed.items():
            if key not in self._switch:
                self._on_switch(RawSwitchEvent(None, data))


def switch_key(data: SwitchFaultData) -> str:
    """`<code>_<switch chip>_<port>`: one active switch fault (the FaultTimeAndLevelMap key)."""
    return f"{data.assembled_fault_code}_{data.switch_chip_id}_{data.switch_port_id}"


def _booting(chip: Chip) -> bool:
    """The chip's last read showed a boot status short of ready: it is being reset."""
    boot = chip.dynamic.boot_status if chip.dynamic is not None else None
    return boot is not None and boot.is_ok and boot.value != BOOT_STATUS_READY
