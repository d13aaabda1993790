"""The fault-manager's reactor: exporter events in, verdicts and the device-info ConfigMap out.

Flow: the exporter's event stream is resumed from the last event stored for its run; each
batch of fault events is written to SQLite first (idempotent on the exporter's event id)
and applied to the engine after, so a crash loses or doubles nothing. A gap, a new
exporter run or our own start reconciles against a fresh snapshot with synthetic events
whose ids are deterministic. Changed chips are re-evaluated, their verdicts published, and
the ConfigMap rewritten (at most once per write interval, plus a periodic refresh).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from ascend_common import sse
from ascend_common.adapters.kube.configmaps import ConfigMaps, Conflict
from ascend_common.adapters.kube.events import MAX_MESSAGE, FaultEvents
from ascend_common.chips import ChipFamily
from ascend_common.clients.backoff import Backoff
from ascend_common.clients.exporter import ExporterClient, ExporterError
from ascend_common.clock import Clock
from ascend_common.deviceinfo import (
    MANUALLY_SEPARATE_KEY,
    UPGRADE_REASON_KEY,
    ChipReport,
    parse_manually_separated,
    parse_upgrade_reasons,
    render_device_info,
    upgrade_reasons_json,
)
from ascend_common.essential import essential
from ascend_common.faults import FaultLevel, is_network_code, normalize_code
from ascend_common.schemas.exporter import Chip, ChipList, ChipState, EventType, ExporterEvent, StreamHello
from ascend_common.superpod import NO_SUPER_POD, super_pod
from pydantic import ValidationError

from fault_manager.engine import (
    BY_ADOPTION,
    BY_RELEASE,
    BY_RULE,
    UPGRADE_AUTOFILL,
    ChipFaults,
    Escalation,
    Evaluation,
    FaultEngine,
    Policy,
    stored_escalation,
)
from fault_manager.faultlist import Reason, fault_entries, fix_manually_separate_reasons, upgrade_reasons
from fault_manager.store import EscalationRow, FaultEventRow, Store
from fault_manager.switches import SwitchFaults
from fault_manager.verdicts import VerdictBoard

log = logging.getLogger(__name__)
NAMESPACE = "kube-system"
LABELS = {"mx-consumer-cim": "true"}
BATCH = 500
CONFLICT_RETRIES = 5
PRUNE_PERIOD_S = 3600.0


class _Resync(Exception):
    """The stream cannot continue where it is (new exporter run, gap): resume from `resume`."""

    def __init__(self, resume: str | None) -> None:
        super().__init__(resume)
        self.resume = resume


@dataclass
class FaultManager:
    store: Store
    engine: FaultEngine
    exporter: ExporterClient
    configmaps: ConfigMaps
    clock: Clock
    node_name: str
    write_interval: float = 1.0
    refresh_period: float = 300.0
    board: VerdictBoard = field(default_factory=VerdictBoard)
    in_use_for_health: Callable[[str], bool] = lambda _chip: False
    in_use: Callable[[], set[str]] = set
    retention_s: float = 30 * 86400.0
    events: FaultEvents | None = None  # Kubernetes Events (rate-limited); None: not reported
    ingested: int = 0
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    inventory: asyncio.Event = field(default_factory=asyncio.Event)  # the exporter's chip list has been read

    def __post_init__(self) -> None:
        self.rtype = "Ascend910"
        self.evaluations: dict[str, Evaluation] = {}
        self._queue: asyncio.Queue[FaultEventRow | ChipList] = asyncio.Queue()
        self._dirty: set[str] = set()
        self._write_wanted = asyncio.Event()
        self._released: dict[str, list[Reason]] = {}  # reasons removed since the last ConfigMap write
        self._save_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_written: tuple[object, ...] | None = None
        self._last_write = 0.0
        self._last_sync = 0.0  # the writer's last read of the ConfigMap (and write, if it wrote)
        self._written_manual: set[str] | None = None
        self._fresh = False  # no state of ours for the node: adopt the ConfigMap's isolations first
        self._pods_pending: asyncio.TimerHandle | None = None
        self.switches = SwitchFaults()
        self._isolated_reported: dict[str, bool] = {}
        self.has_switch = False
        self.super_pod = NO_SUPER_POD

    @property
    def cm_name(self) -> str:
        return f"mindx-dl-deviceinfo-{self.node_name}"

    # ---- start-up ---------------------------------------------------------------------------

    async def start(self) -> None:
        await self._restore()
        self._tasks = [
            essential(self._follow(), "ingest-follow"),
            essential(self._apply_loop(), "ingest-apply"),
            essential(self._timer(), "policy-timer"),
            essential(self._writer(), "deviceinfo-writer"),
            essential(self._retention(), "retention"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.wait(self._tasks, timeout=5)
        self._tasks.clear()

    async def _restore(self) -> None:
        """Rebuild the engine from SQLite: manual isolation, then every event in the policy horizon."""
        manual = await asyncio.to_thread(self.store.manual.chips)
        states = await asyncio.to_thread(self.store.states.all)
        # A database without state for the node (new, or its hostPath lost): what the device-info
        # ConfigMap says is isolated, and why, is adopted before our first write (`_adopt`).
        self._fresh = not states and not manual
        since_ms = int((self.clock.now() - self.engine.real_time(self.engine.keep_s)) * 1000)
        for name in sorted(set(states) | manual):
            rows = await asyncio.to_thread(self.store.events.of_chip, name, since_ms)
            chip = self.engine.chip(name, rows[0].logic_id if rows else -1, rows[0].phy_id if rows else -1)
            chip.manual = name in manual
            last = await asyncio.to_thread(self.store.manual.audit, name, 1)
            chip.manual_by_rule = chip.manual and bool(last) and last[0].separated and last[0].set_by == BY_RULE
            if chip.manual and last and last[0].separated and last[0].set_by == BY_ADOPTION:
                held = await asyncio.to_thread(self.store.isolations.escalations, True, name)
                # A FaultAutofill reason older than the adoption came with the ConfigMap and releases the
                # chip by its rule; one of ours (made at or after it) only fills in for a missing reason.
                adopted = [r for r in held if r.upgrade_type != UPGRADE_AUTOFILL or r.upgrade_time_ms < last[0].at_ms]
                self.engine.adopt(name, [stored_escalation(row) for row in adopted])
            if last and not last[0].separated:
                # Frequency windows restart at a release: without this a restart would count the
                # occurrences before it again and isolate the chip anew.
                chip.released_at = self.engine.policy_time(last[0].at_ms / 1000)
            for row in rows:
                self.engine.apply(name, row.code, row.assertion, row.severity, row.raised_at_ms / 1000)
            self._dirty.add(name)
        await self._autofill_reasons()
        self._evaluate_dirty()

    async def _autofill_reasons(self) -> None:
        """An isolation no rule holds (an operator's, or one the current rules would not make) gets a
        FaultAutofill reason, as the reference's FixManuallySeparateReason gives one at start; one
        stored from an earlier start keeps its time, so restarts do not postpone its release."""
        now = self.clock.now()
        stored = await asyncio.to_thread(self.store.isolations.escalations, True)
        made = {row.chip: row.upgrade_time_ms / 1000 for row in stored if row.upgrade_type == UPGRADE_AUTOFILL}
        # Only an isolated chip can need one: the others are not evaluated here.
        separated = [name for name in sorted(self.engine.chips) if self.engine.chips[name].manual]
        current = {
            name: [Reason(e.code, e.level, e.upgrade_type, e.at_ms) for e in self.engine.peek(name, now).escalations]
            for name in separated
        }
        _, autofilled = fix_manually_separate_reasons(current, separated, int(now * 1000))
        for name in autofilled:
            self.engine.autofill(name, made.get(name, now))
            log.info("isolation without a reason: FaultAutofill reason", extra={"chip": name})

    # ---- ingestion ----------------------------------------------------------------------------

    async def _follow(self) -> None:
        """Tail the exporter's events without missing or doubling one.

        Resume after the last event stored for the exporter's run. For a run we have stored
        nothing of yet, replay it from its start (the exporter keeps the run's first 16,384
        events), then reconcile against the snapshot taken before the replay, to drop codes
        left over from an earlier run. When the exporter cannot replay (a gap), reconcile
        against a fresh snapshot and resume exactly where that snapshot stands.
        """
        backoff = Backoff(base=0.1, cap=5.0)
        resume: str | None = None
        # A snapshot taken before a replay, queued once the replay has passed the event it stands
        # at: reconciled earlier, it would synthesise an occurrence the replay then brings again.
        held: ChipList | None = None
        while True:
            try:
                node = await self.exporter.node()
                if not node.ready:  # its list is not complete before every chip was read once
                    raise ExporterError(503, "the exporter has not read every chip yet")
                if resume is None or not resume.startswith(node.run_id + "-"):
                    held = None
                    resume = await asyncio.to_thread(self.store.events.last_event_id, node.run_id)
                if resume is None:
                    listing = await self.exporter.chips()
                    resume = f"{node.run_id}-0"
                    if listing.last_event_id is None:
                        resume = None
                        await self._queue.put(listing)
                    else:
                        held = listing
                elif not self.inventory.is_set() and held is None:
                    self._take_inventory(await self.exporter.chips())
                self.synced.set()
                backoff.reset()
                async for msg in self.exporter.events(resume):
                    resume = await self._on_message(msg, node.run_id) or resume
                    if held is not None and _passed(resume, held.last_event_id):
                        await self._queue.put(held)
                        held = None
            except _Resync as again:
                held = None  # a fresh snapshot (a gap) or a new run supersedes it
                resume = again.resume
            except (httpx.HTTPError, ExporterError, OSError, ValueError) as exc:
                log.warning("exporter stream lost; resuming", extra={"error": repr(exc)})
                await asyncio.sleep(backoff.next())

    async def _on_message(self, msg: sse.SseMessage, run_id: str) -> str | None:
        """Handle one message; returns the id to resume after when it is an event."""
        if msg.event == "hello":
            if StreamHello.model_validate_json(msg.data).run_id != run_id:
                raise _Resync(None)
            return None
        if msg.event == "gap":
            listing = await self.exporter.chips()
            await self._queue.put(listing)
            raise _Resync(listing.last_event_id)
        try:
            event = ExporterEvent.model_validate_json(msg.data)
        except ValidationError as exc:
            # Resuming at the same id would meet the same event forever and stop all ingestion:
            # skip it and let a fresh snapshot carry whatever state it held.
            log.error("unreadable exporter event skipped; reconciling with the snapshot",
                      extra={"event_id": msg.id, "event": msg.event, "error": str(exc)[:500]})  # fmt: skip
            await self._queue.put(await self.exporter.chips())
            return msg.id
        if event.type is EventType.FAULT and event.fault is not None and event.chip is not None:
            f = event.fault
            await self._queue.put(
                FaultEventRow(
                    event_id=event.id,
                    chip=event.chip,
                    logic_id=event.logic_id or 0,
                    phy_id=event.phy_id or 0,
                    code=f.code,
                    assertion=f.assertion.value,
                    severity=f.severity,
                    source=f.source.value,
                    raised_at_ms=int(event.time * 1000),
                    recorded_at_ms=int(self.clock.now() * 1000),
                )
            )
        elif event.type is EventType.SWITCH_FAULT and event.switch_fault is not None:
            if self.switches.apply(event.switch_fault, int(event.time * 1000)):
                log.info("switch fault", extra={"code": event.switch_fault.assembled_fault_code,
                                                "assertion": event.switch_fault.assertion.value})  # fmt: skip
                self._write_wanted.set()
        elif event.type is EventType.CHIP and event.change is not None and event.chip is not None:
            chip = self.engine.chips.get(event.chip)
            if chip is not None:
                chip.reachable = event.change.state is not ChipState.UNKNOWN
                self._touch(event.chip)
        return event.id

    async def _reconcile(self, listing: ChipList) -> None:
        """Make the engine agree with a snapshot, by synthetic events with deterministic ids."""
        anchor = listing.last_event_id or "none-0"
        now_ms = int(self.clock.now() * 1000)
        with contextlib.suppress(httpx.HTTPError, ExporterError):
            self.switches.replace((await self.exporter.node()).switch_faults, now_ms)
        rows: list[FaultEventRow] = []
        self._learn_node(listing)
        for chip in listing.chips:
            state = self._learn(chip)
            codes = (
                set(chip.dynamic.error_codes.value or []) if chip.dynamic and chip.dynamic.error_codes.is_ok else set()
            )
            for code, kind in [(c, "occur") for c in sorted(codes - state.present)] + [
                (c, "recover") for c in sorted(state.present - codes)
            ]:
                rows.append(
                    FaultEventRow(
                        event_id=f"{anchor}-r-{chip.name}-{code}-{kind}",
                        chip=chip.name,
                        logic_id=chip.logic_id,
                        phy_id=chip.phy_id,
                        code=code,
                        assertion=kind,
                        severity=None,
                        source="reconcile",
                        raised_at_ms=now_ms,
                        recorded_at_ms=now_ms,
                    )
                )
            self._touch(chip.name)
        await self._persist_and_apply(rows)
        self._evaluate_dirty()
        self.inventory.set()
        log.info("reconciled with the exporter", extra={"chips": len(listing.chips), "synthesised": len(rows)})

    def _take_inventory(self, listing: ChipList) -> None:
        """Resuming a run whose events we hold: its codes are ours already, but which chips the node
        has (and its resource type) comes from the exporter's list, not from our history."""
        self._learn_node(listing)
        for chip in listing.chips:
            self._learn(chip)
            self._touch(chip.name)
        self._evaluate_dirty()
        self.inventory.set()

    def _learn_node(self, listing: ChipList) -> None:
        """The node's super pod (DeviceInfoCfg SuperPodID / ServerIndex), as the plugin reads it: the
        first chip by logic id that answered."""
        pod = super_pod(c.static for c in sorted(listing.chips, key=lambda c: c.logic_id))
        if pod != self.super_pod:
            self.super_pod = pod
            self._write_wanted.set()

    def _learn(self, chip: Chip) -> ChipFaults:
        """A chip of the exporter's list: the node's resource type, and the chip's ids and reachability."""
        if chip.resource_type is not None:
            self.rtype = chip.resource_type.value
        # SwitchInfoCfg is written on nodes with a switch: A3 (and the 950 generation).
        self.has_switch = self.has_switch or chip.family in (ChipFamily.ASCEND910A3, ChipFamily.ASCEND950)
        state = self.engine.chip(chip.name, chip.logic_id, chip.phy_id)
        state.reachable = chip.state is not ChipState.UNKNOWN
        return state

    async def _apply_loop(self) -> None:
        """Events in batches (one transaction each), and snapshots to reconcile with, in stream order."""
        held: FaultEventRow | ChipList | None = None
        while True:
            item = held if held is not None else await self._queue.get()
            held = None
            if isinstance(item, ChipList):
                await self._reconcile(item)
                continue
            batch = [item]
            while len(batch) < BATCH and not self._queue.empty():
                following = self._queue.get_nowait()
                if isinstance(following, ChipList):
                    held = following  # after this batch: the snapshot reflects it
                    break
                batch.append(following)
            await self._persist_and_apply(batch)

    async def _persist_and_apply(self, rows: list[FaultEventRow]) -> None:
        if not rows:
            return
        for row in rows:
            self.engine.chip(row.chip, row.logic_id, row.phy_id)
        inserted = await asyncio.to_thread(self.store.events.append, rows)
        self.ingested += inserted
        for row in rows:
            self.engine.apply(row.chip, row.code, row.assertion, row.severity, row.raised_at_ms / 1000)
            self._touch(row.chip)
        self._evaluate_dirty()
        if self.events is not None and inserted:
            for row in rows:
                if row.assertion == "recover":
                    self.events.recovered(row.chip, row.code)
                else:
                    ev = self.evaluations.get(row.chip)
                    self.events.occurred(row.chip, row.code, ev.verdict.fault_level.value if ev else "")

    async def _retention(self) -> None:
        """Bounded history: prune old events hourly, a second at a time (the store keeps what is still needed)."""
        while True:
            await asyncio.sleep(PRUNE_PERIOD_S)
            cutoff = int((self.clock.now() - self.retention_s) * 1000)
            try:
                result = await asyncio.to_thread(self.store.retention.prune, cutoff, time_budget_s=1.0)
                log.info("pruned old fault events", extra={"result": str(result)})
            except Exception as exc:  # retention is housekeeping: report and try again later
                log.warning("pruning failed", extra={"error": str(exc)})

    # ---- evaluation -----------------------------------------------------------------------------

    def _touch(self, chip: str) -> None:
        self._dirty.add(chip)
        self._wake.set()

    def _evaluate_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        now = self.clock.now()
        changed_states = []
        for name in sorted(dirty):
            ev = self.engine.evaluate(name, now, self.in_use_for_health(name))
            self.evaluations[name] = ev
            if self.board.publish(ev.verdict):
                changed_states.append(ev)
                log.info(
                    "verdict",
                    extra={
                        "chip": name,
                        "fault_level": ev.verdict.fault_level.value,
                        "schedulable": ev.verdict.schedulable,
                        "reason": ev.verdict.reason.value,
                    },
                )
            if ev.isolate and not self._isolated_reported.get(name):
                self._spawn(asyncio.to_thread(self.store.manual.set_separated, name, True, BY_RULE, int(now * 1000)))
                if self.events is not None:
                    self.events.isolated(name, BY_RULE)
            if ev.released:
                self._spawn(
                    asyncio.to_thread(self.store.manual.set_separated, name, False, BY_RELEASE, int(now * 1000))
                )
                log.info("rule isolation released", extra={"chip": name, "by": BY_RELEASE})
                if self.events is not None:
                    self.events.released(name, BY_RELEASE)
            self._isolated_reported[name] = ev.isolate
        if changed_states:
            self._spawn(self._save(changed_states))
            self._write_wanted.set()

    async def _save(self, evaluations: list[Evaluation]) -> None:
        # In order (the lock is FIFO): an older save finishing last would leave stale escalations.
        async with self._save_lock:
            for ev in evaluations:
                v = ev.verdict
                await asyncio.to_thread(
                    self.store.states.save,
                    v.chip,
                    v.fault_level.value,
                    v.schedulable,
                    v.reason.value,
                    int(v.since * 1000),
                    v.codes,
                    int(self.clock.now() * 1000),
                )
                released = await asyncio.to_thread(self._sync_escalations, ev)
                if released:
                    self._released.setdefault(v.chip, []).extend(released)
        # Released reasons are announced after the next write.
        self._write_wanted.set()

    def _sync_escalations(self, ev: Evaluation) -> list[Reason]:
        """The chip's UpgradeFaultReason entries are exactly its current escalations: new ones are
        recorded, and ones its rules no longer hold (a duration that cleared, a frequency
        escalation released) are released with the time they ended. Returns those released."""
        chip = ev.verdict.chip
        now_ms = int(self.clock.now() * 1000)
        current = {(e.code, e.upgrade_type) for e in ev.escalations}
        for esc in ev.escalations:
            self.store.isolations.add(chip, esc.code, esc.level.value, esc.upgrade_type, esc.at_ms)
        released: list[Reason] = []
        for row in self.store.isolations.escalations(True, chip):
            if (row.code, row.upgrade_type) not in current:
                self.store.isolations.release(chip, now_ms, "rule no longer holds", row.code, row.upgrade_type)
                released.append(_reason(row))
        return released

    async def _release_reasons(self, chip: str, at_ms: int, by: str) -> None:
        """An operator released the chip: its ManuallySeparateNPU reasons go (reference
        RemoveManuallySeparateReasonCache); others (a FaultDuration still counting) stay."""
        rows = await asyncio.to_thread(self.store.isolations.escalations, True, chip)
        rows = [row for row in rows if row.level == FaultLevel.MANUALLY_SEPARATE_NPU.value]
        await asyncio.to_thread(
            self.store.isolations.release, chip, at_ms, by, level=FaultLevel.MANUALLY_SEPARATE_NPU.value
        )
        self._released.setdefault(chip, []).extend(_reason(row) for row in rows)

    def _announce_released(self) -> None:
        """After a ConfigMap write, one Event with every reason removed since the last (reference
        writeDeviceInfoCm -> WriteUpgradeReasonRemoveEvent)."""
        if not self._released:
            return
        released, self._released = self._released, {}
        spell = self.engine.policy.spell
        message = upgrade_reasons_json({chip: upgrade_reasons(rs, spell) for chip, rs in released.items()})
        log.info("upgrade fault reasons released", extra={"chips": sorted(released), "reasons": message})
        if self.events is None:
            return
        if len(message) <= MAX_MESSAGE:
            self.events.reasons_released(message)
            return
        # The apiserver refuses a longer message on an Event with eventTime: one Event per chip instead.
        for chip, rs in sorted(released.items()):
            self.events.reasons_released(upgrade_reasons_json({chip: upgrade_reasons(rs, spell)}))

    def _spawn(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[call-overload]
        task.add_done_callback(_log_failure)

    async def _timer(self) -> None:
        """Re-evaluate when a policy window ends by itself (FaultTimeout, RecoverTimeout, release)."""
        while True:
            wakes = [ev.wake_at for ev in self.evaluations.values() if ev.wake_at is not None]
            delay = max(0.0, min(wakes) - self.clock.now()) if wakes else 60.0
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay + 0.001):
                    await self._wake.wait()
            due = [n for n, ev in self.evaluations.items() if ev.wake_at is not None and ev.wake_at <= self.clock.now()]
            self._dirty.update(due)
            self._evaluate_dirty()

    def set_resetting(self, chips: tuple[str, ...], on: bool) -> None:
        """A hot reset runs on these chips: they show as `-Recovering` and stay unschedulable."""
        for name in chips:
            if name in self.engine.chips:
                self.engine.chips[name].resetting = on
                self._dirty.add(name)
        self._evaluate_dirty()

    def adopt_policy(self, policy: Policy) -> None:
        self.engine.set_policy(policy)
        if self._tasks:  # running: apply the new rules to every chip now
            self._reevaluate_all()

    def pods_changed(self) -> None:
        """Which chips are in use changed: every verdict (running-pod rule) and the free list may too."""
        if self._pods_pending is None:
            self._pods_pending = asyncio.get_running_loop().call_later(0.05, self._reevaluate_all)

    def _reevaluate_all(self) -> None:
        self._pods_pending = None
        self._dirty.update(self.engine.chips)
        self._evaluate_dirty()
        self._write_wanted.set()

    async def set_manual(self, chip: str, on: bool, by: str) -> None:
        """An operator's isolation or release through the API (the ConfigMap follows)."""
        now = self.clock.now()
        if on:
            self.engine.isolate(chip)
        else:
            self.engine.release(chip, now)
            await self._release_reasons(chip, int(now * 1000), by)
        await asyncio.to_thread(self.store.manual.set_separated, chip, on, by, int(now * 1000))
        log.info("chip isolated" if on else "chip released", extra={"chip": chip, "by": by})
        if self.events is not None:
            (self.events.isolated if on else self.events.released)(chip, by)
        self._touch(chip)
        self._evaluate_dirty()

    # ---- the device-info ConfigMap -----------------------------------------------------------

    async def _writer(self) -> None:
        # Never publish a node before its inventory is known: a first write with the lists empty tells
        # ClusterD and Volcano, for a moment, that the node has no NPU.
        await self.inventory.wait()
        self._write_wanted.set()  # then at once: an administrator's edit is honoured only after our first write
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self.refresh_period, 5.0)):
                    await self._write_wanted.wait()
            self._write_wanted.clear()
            # One sync (a read, and a write if the content changed) per write interval, not only
            # one write: every pod event asks for a sync, and on a busy node most find no change.
            wait = self.write_interval - (time.monotonic() - self._last_sync)
            if wait > 0:
                await asyncio.sleep(wait)
            self._last_sync = time.monotonic()
            try:
                await self.sync_configmap()
            except Exception as exc:  # keep writing later; the next change or refresh retries
                log.error("device-info ConfigMap not written", extra={"configmap": self.cm_name, "error": str(exc)})

    async def sync_configmap(self) -> bool:
        """Honour an administrator's ManuallySeparateNPU edits, then write if anything changed."""
        for _ in range(CONFLICT_RETRIES):
            current = await self.configmaps.get(NAMESPACE, self.cm_name)
            if current is not None:
                if self._written_manual is None and self._fresh:
                    await self._adopt(current.data)
                if self._written_manual is None:
                    self._written_manual = await asyncio.to_thread(self._manual_as_written, current.data)
                await self._admin_edits(current.data.get("ManuallySeparateNPU", ""))
            data, content = await self._render()
            refresh_due = time.monotonic() - self._last_write >= self.refresh_period
            if current is not None and content == self._last_written and not refresh_due:
                self._announce_released()  # the write that removed them has gone out already
                return False
            try:
                await self.configmaps.put(
                    NAMESPACE, self.cm_name, data, LABELS, current.resource_version if current else None
                )
            except Conflict:
                log.info("device-info ConfigMap changed under us; re-reading", extra={"configmap": self.cm_name})
                continue
            self._last_written = content
            self._last_write = time.monotonic()
            # What was written, not the engine's state now: an isolation made during the write is not in it.
            self._written_manual = set(parse_manually_separated(data[MANUALLY_SEPARATE_KEY]))
            self._announce_released()
            return True
        raise RuntimeError(f"{self.cm_name}: still conflicting after {CONFLICT_RETRIES} tries")

    async def _adopt(self, data: dict[str, str]) -> None:
        """First start on a node someone ran before (the reference plugin, or us with the database
        lost): keep every chip its ManuallySeparateNPU lists isolated, with its UpgradeFaultReason
        entries (reference `LoadDeviceInfoCm`), recorded in the audit as adopted, all in one
        transaction. A chip listed with no reason is an administrator's isolation: never released by
        a rule. Until that transaction is in, the next sync tries again."""
        try:
            listed = parse_manually_separated(data.get(MANUALLY_SEPARATE_KEY, ""))
        except ValueError as exc:
            log.warning("not adopting a malformed ManuallySeparateNPU",
                        extra={"configmap": self.cm_name, "error": str(exc)})  # fmt: skip
            listed = []
        try:
            reasons = parse_upgrade_reasons(data.get(UPGRADE_REASON_KEY) or "{}")
        except ValueError as exc:
            log.warning("adopting isolations without their malformed UpgradeFaultReason",
                        extra={"configmap": self.cm_name, "error": str(exc)})  # fmt: skip
            reasons = {}
        adopted: dict[str, list[Escalation]] = {}
        for name in listed:
            if name not in self.engine.chips:
                log.warning("not adopting the isolation of a chip the node does not have",
                            extra={"chip": name, "configmap": self.cm_name})  # fmt: skip
                continue
            held = adopted[name] = []
            for reason in reasons.get(name, []):
                try:
                    code = reason.fault_code
                    if reason.upgrade_type != UPGRADE_AUTOFILL:
                        code = normalize_code(code)
                    held.append(Escalation(code, FaultLevel(reason.fault_level), reason.upgrade_type,
                                           reason.upgrade_time_ms))  # fmt: skip
                except ValueError as exc:
                    log.warning("not adopting an unreadable UpgradeFaultReason entry",
                                extra={"chip": name, "reason": str(reason), "error": str(exc)})  # fmt: skip
        rows = {
            name: [(e.code, e.level.value, e.upgrade_type, e.at_ms) for e in held] for name, held in adopted.items()
        }
        await asyncio.to_thread(self.store.isolations.adopt, rows, BY_ADOPTION, int(self.clock.now() * 1000))
        self._fresh = False
        for name, held in adopted.items():
            self.engine.adopt(name, held)
            log.info("adopted an isolation from the device-info ConfigMap",
                     extra={"chip": name, "reasons": [f"{e.upgrade_type}:{e.code}" for e in held]})  # fmt: skip
            self._touch(name)  # the policy timer learns when its reasons end
        await self._autofill_reasons()
        self._evaluate_dirty()
        self._written_manual = set(adopted)

    def _manual_as_written(self, data: dict[str, str]) -> set[str]:
        """Which chips the ConfigMap listed as isolated when it was last written (its UpdateTime), by the
        audit of our isolations: what differs from that now is an administrator's edit, made while we
        were not running or before our first write. Without an UpdateTime: the isolations we hold."""
        try:
            written_ms = int(json.loads(data["DeviceInfoCfg"])["DeviceInfo"]["UpdateTime"]) * 1000 + 999
        except (KeyError, TypeError, ValueError):
            return self.store.manual.chips()
        held: set[str] = set()
        for chip in set(self.engine.chips) | self.store.manual.chips():
            last = next((a for a in self.store.manual.audit(chip) if a.at_ms <= written_ms), None)
            if last is not None and last.separated:
                held.add(chip)
        return held

    async def _admin_edits(self, value: str) -> None:
        assert self._written_manual is not None
        try:
            listed = set(parse_manually_separated(value))
        except ValueError as exc:
            log.warning(
                "ignoring a malformed ManuallySeparateNPU", extra={"configmap": self.cm_name, "error": str(exc)}
            )
            return
        now = self.clock.now()
        for name in sorted(self._written_manual - listed):
            if name in self.engine.chips:
                self.engine.release(name, now)
                await asyncio.to_thread(self.store.manual.set_separated, name, False, "administrator", int(now * 1000))
                await self._release_reasons(name, int(now * 1000), "administrator")
                log.info("administrator released a chip", extra={"chip": name})
                if self.events is not None:
                    self.events.released(name, "administrator")
                self._dirty.add(name)
        for name in sorted(listed - self._written_manual):
            if name in self.engine.chips:
                self.engine.isolate(name)
                await asyncio.to_thread(self.store.manual.set_separated, name, True, "administrator", int(now * 1000))
                log.info("administrator isolated a chip", extra={"chip": name})
                if self.events is not None:
                    self.events.isolated(name, "administrator")
                self._dirty.add(name)
        self._written_manual = listed & set(self.engine.chips)
        self._evaluate_dirty()

    async def _render(self) -> tuple[dict[str, str], tuple[object, ...]]:
        in_use = self.in_use()
        reports: list[ChipReport] = []
        manual: list[str] = []
        # From the evaluations, not the store: a reason goes out in the same write as the verdict it explains.
        reasons = {
            name: [Reason(e.code, e.level, e.upgrade_type, e.at_ms) for e in ev.escalations]
            for name, ev in self.evaluations.items()
            if ev.escalations
        }
        policy = self.engine.policy
        for name, chip in sorted(self.engine.chips.items(), key=lambda kv: kv[1].logic_id):
            ev = self.evaluations.get(name)
            if ev is None:
                continue
            v = ev.verdict
            if chip.manual:
                manual.append(name)
            faults = fault_entries(
                v,
                ev.codes,
                reasons.get(name, ()),
                is_network=is_network_code,
                table_level=policy.table_level,
                spell=policy.spell,
            )
            reports.append(
                ChipReport(
                    name,
                    healthy=v.schedulable,
                    in_use=name in in_use,
                    network_unhealthy=not v.network_healthy,
                    recovering=v.resetting,
                    faults=tuple(faults),
                )
            )
        switch = self.switches.report(self.engine.policy.switch) if self.has_switch else None
        upgrade = {chip: upgrade_reasons(chip_reasons, policy.spell) for chip, chip_reasons in reasons.items()}
        content = (tuple(reports), tuple(manual), tuple(sorted((k, tuple(v)) for k, v in upgrade.items())), switch,
                   self.super_pod)  # fmt: skip
        data = render_device_info(
            self.rtype, reports, update_time_s=int(self.clock.now()), manually_separated=manual,
            upgrade_reasons=upgrade, switch=switch, super_pod_id=self.super_pod.super_pod_id,
            server_index=self.super_pod.server_index,
        )  # fmt: skip
        return data, content


def _passed(event_id: str | None, anchor: str | None) -> bool:
    """Whether the stream has reached `anchor`, an event id of the same run (`<run>-<seq>`)."""
    if event_id is None or anchor is None:
        return anchor is None
    return int(event_id.rsplit("-", 1)[1]) >= int(anchor.rsplit("-", 1)[1])


def _reason(row: EscalationRow) -> Reason:
    return Reason(row.code, FaultLevel(row.level), row.upgrade_type, row.upgrade_time_ms)


def _log_failure(task: asyncio.Future[object]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background write failed", extra={"error": repr(task.exception())})
