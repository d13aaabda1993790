"""The fault-manager's reactor: the one task that owns the engine.

It takes the inputs of the inbox in order (fault events in batches, one transaction each,
written to SQLite before they are applied, so a crash loses or doubles nothing), re-evaluates
the chips they changed and the ones whose policy window ends by itself, saves what changed,
and publishes: verdicts on the board, the node's state for the device-info ConfigMap writer.
A step that an input `ask`ed for is answered once all that is done.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping

from ascend_common.chip_traits import IdScheme, SwitchInfo, traits
from ascend_common.clock import Clock
from ascend_common.faults import code_level, is_network_code, network_level
from ascend_common.faults.codes import HBM_DOUBLE_BIT_CODE
from ascend_common.inuse import chips_in_use_for_health
from ascend_common.schemas.exporter import Chip, ChipList, ChipState
from ascend_common.superpod import super_pod

from fault_manager.deviceinfo.configmap import UNWATCHED_SWITCH, SwitchReport, UnwatchedSwitch
from fault_manager.deviceinfo.faultlist import Reason
from fault_manager.events.fault_events import FaultEvents
from fault_manager.events.reference import FaultNotice
from fault_manager.hotreset.duo import duo_card_mates, with_duo_rule
from fault_manager.policy.engine import BY_RELEASE, BY_RULE, ChipFaults, Evaluation, FaultEngine, Policy
from fault_manager.reactor.association import HbmAssociation, Outcome
from fault_manager.reactor.chips_in_use import ChipsInUse, FreeListUse
from fault_manager.reactor.ingest import reconcile_rows
from fault_manager.reactor.inputs import (
    AdminEdits,
    ChipReachability,
    Inbox,
    Input,
    Inventory,
    OperatorSeparation,
    PodChanged,
    PodsListed,
    PolicyChanged,
    Queued,
    ResetMarked,
    Snapshot,
    SwitchFaultSeen,
    WrittenIsolations,
)
from fault_manager.reactor.isolation import IsolationKeeper, stored_reason
from fault_manager.reactor.published import ChipEntry, NodeState, Published
from fault_manager.reactor.restore import restore
from fault_manager.reactor.switches import SwitchFaults
from fault_manager.store import FaultEventRow, Store, in_store_thread

log = logging.getLogger(__name__)
BATCH = 500
POD_SETTLE_S = 0.05  # a burst of pod events (a re-list, a patch storm) becomes one re-evaluation
IDLE_WAKE_S = 60.0


def first_chip_hbm_mb(listing: ChipList) -> int:
    """Reference manager.go `getChipMemory`: the HBM size (MB) of the node's first chip, by logic
    id; 0 when its family has none (common.HasOnChipMemory) or it was not read."""
    if not listing.chips:
        return 0
    first = min(listing.chips, key=lambda c: c.logic_id)
    hbm = first.dynamic.hbm if first.dynamic is not None else None
    on_chip = first.family is not None and traits(first.family).on_chip_memory  # common.HasOnChipMemory
    if not on_chip or hbm is None or not hbm.is_ok or hbm.value is None:
        return 0
    return hbm.value.total_mb


class Reactor:
    def __init__(
        self,
        engine: FaultEngine,
        store: Store,
        inbox: Inbox,
        published: Published,
        clock: Clock,
        events: FaultEvents | None,
        configmap: str,
        *,
        duo_rule: bool = False,
    ) -> None:
        self.engine = engine
        self.store = store
        self.inbox = inbox
        self.published = published
        self.clock = clock
        self.events = events  # Kubernetes Events (rate-limited); None: not reported
        self.isolations = IsolationKeeper(engine, store, clock, published, events, configmap)
        self.switches = SwitchFaults()
        self.association = HbmAssociation()  # AI-core echoes of an HBM error: held, dropped or reported late
        # card id, device id, whether the chip is named by its logic id (a 950 chip's fault Events)
        self._chip_ids: dict[str, tuple[int, int, bool]] = {}
        self.in_use_for_health = ChipsInUse(chips_in_use_for_health)
        self.free_list_use = FreeListUse()
        self.evaluations: dict[str, Evaluation] = {}
        self.ingested = 0  # fault events stored since start
        self._dirty: set[str] = set()
        self._isolated_reported: dict[str, bool] = {}
        self._fresh = False  # no state of ours for the node: adopt the ConfigMap's isolations first
        self._pods_due: float | None = None  # loop time the pending pod changes are re-evaluated at
        self._node_changed = False  # the node's facts (type, switch, super pod, inventory) changed
        self._inventory_known = False
        self._rtype = "Ascend910"
        self._switch_kind = SwitchInfo.NONE  # A3 or 950: a node that writes SwitchInfoCfg
        self._super_pod = published.state.super_pod
        self._hbm_mb = 0  # the first chip's HBM size, for the soft-share quota rule; 0 until read
        self._hbm_unknown_logged = False
        # Inference hot reset (-hotReset=0): a Duo card's chips are unschedulable together (hotreset/duo.py).
        self.duo_rule = duo_rule
        self._card_mates: dict[str, tuple[str, ...]] = {}

    async def start(self) -> None:
        """Rebuild the engine from SQLite and publish it (before `run`)."""
        self._fresh = await restore(self.engine, self.store, self.clock, self.association)
        self._dirty.update(self.engine.chips)
        await self.isolations.autofill()
        await self._evaluate()

    async def run(self) -> None:
        held: Queued | None = None
        while True:
            queued = held or await self.inbox.next(self._idle_for())
            held = None
            if queued is not None and isinstance(queued.input, FaultEventRow):
                batch = [queued.input]
                while len(batch) < BATCH and (following := self.inbox.next_nowait()) is not None:
                    if not isinstance(following.input, FaultEventRow):
                        held = following  # after this batch, in stream order
                        break
                    batch.append(following.input)
                await self._persist_and_apply(batch)
                queued = None
            await self._step(queued)

    async def _step(self, queued: Queued | None) -> None:
        """Apply one input (if any), re-evaluate what changed or came due, save and publish."""
        if queued is None or queued.answer is None:
            if queued is not None:
                await self._apply(queued.input)
            await self._due()
            await self._evaluate()
            return
        try:
            answer = await self._apply(queued.input)
            await self._due()
            await self._evaluate()
        except Exception as exc:  # the asker's failure (the API answers 500), not the reactor's
            if not queued.answer.done():
                queued.answer.set_exception(exc)
            return
        if not queued.answer.done():  # not abandoned (a cancelled request)
            queued.answer.set_result(answer)

    def _idle_for(self) -> float:
        """Seconds until something falls due without a new input: a policy window, pod changes."""
        wakes = [ev.wake_at for ev in self.evaluations.values() if ev.wake_at is not None]
        held = self.association.wake_at_ms()
        if held is not None:
            wakes.append(held / 1000)
        delay = max(0.0, min(wakes) - self.clock.now()) if wakes else IDLE_WAKE_S
        if self._pods_due is not None:
            delay = min(delay, max(0.0, self._pods_due - asyncio.get_running_loop().time()))
        return delay + 0.001

    async def _due(self) -> None:
        now = self.clock.now()
        if self.association.held:
            if self.engine.policy.customization.duration_rule(HBM_DOUBLE_BIT_CODE) is None:
                outcome = self.association.release_all()  # a new policy without the rule: nothing is held
            else:
                outcome = self.association.due(int(now * 1000))
            await self._apply_rows(self._associated(outcome))
        self._dirty.update(n for n, ev in self.evaluations.items() if ev.wake_at is not None and ev.wake_at <= now)
        if self._pods_due is not None and asyncio.get_running_loop().time() >= self._pods_due:
            self._pods_due = None
            self._reevaluate_all()

    # ---- inputs -------------------------------------------------------------------------------

    async def _apply(self, item: Input) -> object:
        match item:
            case Snapshot():
                await self._reconcile(item)
            case Inventory(listing):
                # Resuming a run whose events we hold: its codes are ours already, but which chips the
                # node has (and its resource type) comes from the exporter's list, not from our history.
                self._learn_node(listing)
                for chip in listing.chips:
                    self._learn(chip)
                self._inventory_known = self._node_changed = True
            case SwitchFaultSeen(fault, at_ms):
                if self.switches.apply(fault, at_ms):
                    log.info("switch fault", extra={"code": fault.assembled_fault_code,
                                                    "assertion": fault.assertion.value})  # fmt: skip
                    self._node_changed = True
                    self.published.write_wanted.set()
            case ChipReachability(name, reachable):
                if name in self.engine.chips:
                    self.engine.chips[name].reachable = reachable
                    self._dirty.add(name)
            case PodChanged(kind, pod):
                # Which chips are in use changed: every verdict (running-pod rule) and the free list may too.
                self.in_use_for_health.changed(kind, pod)
                self.free_list_use.changed(kind, pod)
                if self._pods_due is None:
                    self._pods_due = asyncio.get_running_loop().time() + POD_SETTLE_S
            case PodsListed():
                if self._pods_due is not None:
                    self._pods_due = asyncio.get_running_loop().time()  # _due re-evaluates at once
            case PolicyChanged(policy):
                self.engine.set_policy(policy)
                self._reevaluate_all()  # the new rules apply to every chip now
            case ResetMarked(chips, on):
                for name in chips:
                    if name in self.engine.chips:
                        self.engine.chips[name].resetting = on
                        self._dirty.add(name)
            case OperatorSeparation(chip, on, by):
                self._dirty |= await self.isolations.set_manual(chip, on, by)
            case WrittenIsolations(data):
                return await self._written_isolations(data)
            case AdminEdits(written, listed):
                changed, now_listed = await self.isolations.admin_edits(written, listed)
                self._dirty |= changed
                return now_listed
            case FaultEventRow():
                await self._persist_and_apply([item])
        return None

    async def _written_isolations(self, data: Mapping[str, str]) -> set[str]:
        if self._fresh:
            adopted = await self.isolations.adopt(data)
            self._fresh = False
            self._dirty |= adopted  # the policy timer learns when their reasons end
            await self.isolations.autofill()
            return adopted
        return await in_store_thread(self.isolations.as_written, data, set(self.engine.chips))

    async def _reconcile(self, snapshot: Snapshot) -> None:
        """Make the engine agree with a snapshot, by synthetic events with deterministic ids."""
        listing = snapshot.listing
        now_ms = int(self.clock.now() * 1000)
        if snapshot.switch_faults is not None:
            self.switches.replace(snapshot.switch_faults, now_ms)
        self._learn_node(listing)
        present = {chip.name: frozenset(self._learn(chip).present) for chip in listing.chips}
        rows = reconcile_rows(listing, present, now_ms)
        await self._persist_and_apply(rows)
        self._inventory_known = self._node_changed = True
        log.info("reconciled with the exporter", extra={"chips": len(listing.chips), "synthesised": len(rows)})

    def _learn_node(self, listing: ChipList) -> None:
        """The node's super pod (DeviceInfoCfg SuperPodID / ServerIndex), as the plugin reads it: the
        first chip by logic id that answered; the Duo cards (inference hot reset); and the first chip's HBM size."""
        pod = super_pod(c.static for c in sorted(listing.chips, key=lambda c: c.logic_id))
        if pod != self._super_pod:
            self._super_pod = pod
            self._node_changed = True
            self.published.write_wanted.set()
        if self.duo_rule and (mates := duo_card_mates(listing.chips)) != self._card_mates:
            self._card_mates = mates
            self._dirty.update(mates)
        # A size once read is kept: it never changes, and a later listing taken while the chip
        # does not answer would otherwise take every soft-share chip off the free list.
        hbm = first_chip_hbm_mb(listing)
        if hbm and hbm != self._hbm_mb:
            self._hbm_mb = hbm
            self._node_changed = True
            self.published.write_wanted.set()

    def _learn(self, chip: Chip) -> ChipFaults:
        """A chip of the exporter's list: the node's resource type, and the chip's ids and reachability."""
        if chip.resource_type is not None:
            self._rtype = chip.resource_type.value
        row = traits(chip.family) if chip.family is not None else None
        if row is not None and row.switch_info is not SwitchInfo.NONE:
            self._switch_kind = row.switch_info
        by_logic = row is not None and row.id_scheme is IdScheme.LOGIC
        self._chip_ids[chip.name] = (chip.card_id, chip.device_id, by_logic)
        state = self.engine.chip(chip.name, chip.logic_id, chip.phy_id)
        state.reachable = chip.state is not ChipState.UNKNOWN
        self._dirty.add(chip.name)
        return state

    async def _persist_and_apply(self, rows: list[FaultEventRow]) -> None:
        if not rows:
            return
        for row in rows:
            self.engine.chip(row.chip, row.logic_id, row.phy_id)
        inserted = await in_store_thread(self.store.events.append, rows)
        self.ingested += inserted
        if self.events is not None and inserted:
            for row in rows:
                self.events.arrived(self._notice(row))
        policy = self.engine.policy
        if policy.customization.duration_rule(HBM_DOUBLE_BIT_CODE) is None:
            outcome = self.association.release_all()  # nothing held unless the rule just went
            outcome.apply.extend(rows)
        else:
            outcome = self.association.admit(rows, int(self.clock.now() * 1000))
        await self._apply_rows(self._associated(outcome), announce=bool(inserted))

    def _associated(self, outcome: Outcome) -> list[FaultEventRow]:
        """The rows the association lets through; the drops logged (the store keeps them)."""
        for row in outcome.dropped:
            log.info(
                "AI-core fault dropped: an HBM multi-bit ECC fault of the chip explains it",
                extra={"chip": row.chip, "code": row.code, "assertion": row.assertion, "event_id": row.event_id,
                       "raised_at_ms": row.raised_at_ms},
            )  # fmt: skip
        return outcome.apply

    async def _apply_rows(self, rows: list[FaultEventRow], *, announce: bool = True) -> None:
        """Fault events into the engine, the chips evaluated, and (`announce`) our Events of them."""
        for row in rows:
            self.engine.apply(row.chip, row.code, row.assertion, row.severity, row.raised_at_ms / 1000)
            self._dirty.add(row.chip)
        await self._evaluate()
        if self.events is not None and announce:
            for row in rows:
                if row.assertion == "recover":
                    self.events.recovered(row.chip, row.code)
                else:
                    ev = self.evaluations.get(row.chip)
                    self.events.occurred(row.chip, row.code, ev.verdict.fault_level.value if ev else "")

    def _notice(self, row: FaultEventRow) -> FaultNotice:
        """A fault event as the reference's Event describes it: the code's own level, the chip's ids."""
        policy = self.engine.policy
        if is_network_code(row.code):
            level = network_level(policy.table, row.code)
        else:
            chip = self.engine.chips.get(row.chip)
            severity = row.severity if row.severity is not None or chip is None else chip.severity.get(row.code)
            level = code_level(policy.table, row.code, severity)
        card, device, a5 = self._chip_ids.get(row.chip, (None, None, False))
        return FaultNotice(row.chip, row.logic_id, card, device, a5, policy.spell(row.code), row.assertion, level.value)

    def _reevaluate_all(self) -> None:
        self._dirty.update(self.engine.chips)
        self._node_changed = True  # the free list follows the pods
        self.published.write_wanted.set()

    # ---- evaluation and publishing ------------------------------------------------------------

    async def _evaluate(self) -> None:
        dirty, self._dirty = self._dirty, set()
        if not dirty and not self._node_changed:
            return
        now = self.clock.now()
        changed: list[Evaluation] = []
        isolated: list[str] = []
        released: list[str] = []
        # A Duo card's chips are evaluated together: one's verdict follows its cardmate's.
        dirty |= {mate for name in dirty for mate in self._card_mates.get(name, ())}
        own = {name: self.engine.evaluate(name, now, name in self.in_use_for_health) for name in sorted(dirty)}
        verdicts = {name: ev.verdict for name, ev in own.items()}
        for name in sorted(dirty):
            ev = own[name]
            if self._card_mates:
                ev = dataclasses.replace(ev, verdict=with_duo_rule(ev.verdict, self._card_mates, verdicts))
            self.evaluations[name] = ev
            if self.published.board.publish(ev.verdict):
                changed.append(ev)
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
                isolated.append(name)
                if self.events is not None:
                    self.events.isolated(name, BY_RULE)
            if ev.released:
                released.append(name)
                log.info("rule isolation released", extra={"chip": name, "by": BY_RELEASE})
                if self.events is not None:
                    self.events.released(name, BY_RELEASE)
            self._isolated_reported[name] = ev.isolate
        if changed or isolated or released:
            await self._save(changed, isolated, released, int(now * 1000))
        if changed:
            self.published.write_wanted.set()
        self._publish()

    async def _save(self, evaluations: list[Evaluation], isolated: list[str], released: list[str], at_ms: int) -> None:
        """Rule isolations and releases in the audit, changed chips' states and UpgradeFaultReasons.

        A failure is logged, not raised: the verdicts stand, and the next change saves again.
        """
        try:
            reasons = await in_store_thread(self._write_state, evaluations, isolated, released, at_ms)
        except Exception as exc:
            log.error("state not saved", extra={"error": repr(exc)})
            return
        for chip, chip_reasons in reasons:
            self.published.release(chip, chip_reasons)  # announced after the next ConfigMap write

    def _write_state(
        self, evaluations: list[Evaluation], isolated: list[str], released: list[str], at_ms: int
    ) -> list[tuple[str, list[Reason]]]:
        for name in isolated:
            self.store.manual.set_separated(name, True, BY_RULE, at_ms)
        for name in released:
            self.store.manual.set_separated(name, False, BY_RELEASE, at_ms)
        out: list[tuple[str, list[Reason]]] = []
        for ev in evaluations:
            v = ev.verdict
            self.store.states.save(
                v.chip, v.fault_level.value, v.schedulable, v.reason.value, int(v.since * 1000), v.codes, at_ms
            )
            # The chip's UpgradeFaultReason entries are exactly its current escalations: new ones are
            # recorded, and ones its rules no longer hold (a duration that cleared, a frequency
            # escalation released) are released with the time they ended.
            current = {(e.code, e.upgrade_type) for e in ev.escalations}
            for esc in ev.escalations:
                self.store.isolations.add(v.chip, esc.code, esc.level.value, esc.upgrade_type, esc.at_ms)
            gone: list[Reason] = []
            for row in self.store.isolations.escalations(True, v.chip):
                if (row.code, row.upgrade_type) not in current:
                    self.store.isolations.release(v.chip, at_ms, "rule no longer holds", row.code, row.upgrade_type)
                    gone.append(stored_reason(row))
            if gone:
                out.append((v.chip, gone))
        return out

    def _switch_info(self, policy: Policy) -> SwitchReport | UnwatchedSwitch | None:
        """SwitchInfoCfg: an A3 node's switch faults; on a 950 node the key the reference writes with
        no switch faults watched; none elsewhere."""
        match self._switch_kind:
            case SwitchInfo.WATCHED:
                return self.switches.report(policy.switch)
            case SwitchInfo.UNWATCHED:
                return UNWATCHED_SWITCH
            case SwitchInfo.NONE:
                return None

    def _publish(self) -> None:
        self._node_changed = False
        pods = self.free_list_use.use()
        if pods.shared and not self._hbm_mb and not self._hbm_unknown_logged:
            self._hbm_unknown_logged = True  # once, not on every pod event: a size once read is kept
            log.warning(
                "the first chip's HBM size is unknown: chips soft-share pods hold are kept off the free list",
                extra={"chips": sorted(pods.shared)},
            )
        chips = sorted(self.engine.chips.values(), key=lambda c: c.logic_id)
        policy = self.engine.policy
        self.published.state = NodeState(
            policy=policy,
            rtype=self._rtype,
            chips=tuple(
                ChipEntry(c.name, c.manual, self.evaluations[c.name]) for c in chips if c.name in self.evaluations
            ),
            pods=pods,
            hbm_mb=self._hbm_mb,
            switch=self._switch_info(policy),
            super_pod=self._super_pod,
        )
        if self._inventory_known:
            # Never before: a first write with the lists empty tells ClusterD and Volcano, for a moment,
            # that the node has no NPU.
            self.published.inventory.set()
