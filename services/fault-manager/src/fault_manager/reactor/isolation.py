"""ManuallySeparateNPU: who isolates and releases a chip, and the UpgradeFaultReasons that go with it.

Operators isolate through the API, administrators by editing the device-info ConfigMap, a
FaultFrequency rule by itself (the reactor records those); on a first start on a node someone
ran before, the ConfigMap's isolations are adopted. Used by the reactor alone: it owns the
engine. Each method returns the chips whose evaluation it changed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ascend_common.clock import Clock
from ascend_common.faults import FaultLevel, normalize_code
from ascend_common.jsonin import loads_bounded

from fault_manager.deviceinfo.configmap import (
    MANUALLY_SEPARATE_KEY,
    UPGRADE_REASON_KEY,
    parse_manually_separated,
    parse_upgrade_reasons,
)
from fault_manager.deviceinfo.faultlist import Reason, fix_manually_separate_reasons
from fault_manager.events.fault_events import FaultEvents
from fault_manager.policy.engine import BY_ADOPTION, UPGRADE_AUTOFILL, Escalation, FaultEngine
from fault_manager.reactor.published import Published
from fault_manager.store import EscalationRow, Store, in_store_thread

log = logging.getLogger(__name__)
ADMINISTRATOR = "administrator"


class IsolationKeeper:
    def __init__(
        self,
        engine: FaultEngine,
        store: Store,
        clock: Clock,
        published: Published,
        events: FaultEvents | None,
        configmap: str,
    ) -> None:
        self.engine = engine
        self.store = store
        self.clock = clock
        self.published = published
        self.events = events
        self.configmap = configmap  # the device-info ConfigMap's name, for the logs

    async def autofill(self) -> None:
        """An isolation no rule holds (an operator's, or one the current rules would not make) gets a
        FaultAutofill reason, as the reference's FixManuallySeparateReason gives one at start; one
        stored from an earlier start keeps its time, so restarts do not postpone its release."""
        now = self.clock.now()
        stored = await in_store_thread(self.store.isolations.escalations, True)
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

    async def set_manual(self, chip: str, on: bool, by: str) -> set[str]:
        """An operator's isolation or release through the API (the ConfigMap follows)."""
        now = self.clock.now()
        if on:
            self.engine.isolate(chip)
        else:
            self.engine.release(chip, now)
            await self._release_reasons(chip, int(now * 1000), by)
        await in_store_thread(self.store.manual.set_separated, chip, on, by, int(now * 1000))
        log.info("chip isolated" if on else "chip released", extra={"chip": chip, "by": by})
        if self.events is not None:
            (self.events.isolated if on else self.events.released)(chip, by)
        return {chip}

    async def admin_edits(self, written: frozenset[str], listed: frozenset[str]) -> tuple[set[str], set[str]]:
        """ManuallySeparateNPU edited: chips removed since our last write are released, chips added
        isolated. Returns the chips changed, and what the ConfigMap now lists of the node's chips."""
        now = self.clock.now()
        changed: set[str] = set()
        for name in sorted(written - listed):
            if name in self.engine.chips:
                self.engine.release(name, now)
                await in_store_thread(self.store.manual.set_separated, name, False, ADMINISTRATOR, int(now * 1000))
                await self._release_reasons(name, int(now * 1000), ADMINISTRATOR)
                log.info("administrator released a chip", extra={"chip": name})
                if self.events is not None:
                    self.events.released(name, ADMINISTRATOR)
                changed.add(name)
        for name in sorted(listed - written):
            if name in self.engine.chips:
                self.engine.isolate(name)
                await in_store_thread(self.store.manual.set_separated, name, True, ADMINISTRATOR, int(now * 1000))
                log.info("administrator isolated a chip", extra={"chip": name})
                if self.events is not None:
                    self.events.isolated(name, ADMINISTRATOR)
                changed.add(name)
        return changed, set(listed & set(self.engine.chips))

    async def adopt(self, data: Mapping[str, str]) -> set[str]:
        """First start on a node someone ran before (the reference plugin, or us with the database
        lost): keep every chip its ManuallySeparateNPU lists isolated, with its UpgradeFaultReason
        entries (reference `LoadDeviceInfoCm`), recorded in the audit as adopted, all in one
        transaction. A chip listed with no reason is an administrator's isolation: never released by
        a rule. Returns the chips adopted; raises (and the next read tries again) until the
        transaction is in."""
        try:
            listed = parse_manually_separated(data.get(MANUALLY_SEPARATE_KEY, ""), self.published.state.rtype)
        except ValueError as exc:
            log.warning("not adopting a malformed ManuallySeparateNPU",
                        extra={"configmap": self.configmap, "error": str(exc)})  # fmt: skip
            listed = []
        try:
            reasons = parse_upgrade_reasons(data.get(UPGRADE_REASON_KEY) or "{}")
        except ValueError as exc:
            log.warning("adopting isolations without their malformed UpgradeFaultReason",
                        extra={"configmap": self.configmap, "error": str(exc)})  # fmt: skip
            reasons = {}
        adopted: dict[str, list[Escalation]] = {}
        for name in listed:
            if name not in self.engine.chips:
                log.warning("not adopting the isolation of a chip the node does not have",
                            extra={"chip": name, "configmap": self.configmap})  # fmt: skip
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
        await in_store_thread(self.store.isolations.adopt, rows, BY_ADOPTION, int(self.clock.now() * 1000))
        for name, held in adopted.items():
            self.engine.adopt(name, held)
            log.info("adopted an isolation from the device-info ConfigMap",
                     extra={"chip": name, "reasons": [f"{e.upgrade_type}:{e.code}" for e in held]})  # fmt: skip
        return set(adopted)

    def as_written(self, data: Mapping[str, str], chips: set[str]) -> set[str]:
        """Which chips the ConfigMap listed as isolated when it was last written (its UpdateTime), by the
        audit of our isolations: what differs from that now is an administrator's edit, made while we
        were not running or before our first write. Without an UpdateTime: the isolations we hold.
        In a thread (the store's reads); `chips` are the engine's."""
        try:
            written_ms = int(loads_bounded(data["DeviceInfoCfg"], what="DeviceInfoCfg")["DeviceInfo"]["UpdateTime"])
            written_ms = written_ms * 1000 + 999
        except (KeyError, TypeError, ValueError):
            return self.store.manual.chips()
        held: set[str] = set()
        for chip in chips | self.store.manual.chips():
            last = next((a for a in self.store.manual.audit(chip) if a.at_ms <= written_ms), None)
            if last is not None and last.separated:
                held.add(chip)
        return held

    async def _release_reasons(self, chip: str, at_ms: int, by: str) -> None:
        """An operator released the chip: its ManuallySeparateNPU reasons go (reference
        RemoveManuallySeparateReasonCache); others (a FaultDuration still counting) stay."""
        rows = await in_store_thread(self.store.isolations.escalations, True, chip)
        rows = [row for row in rows if row.level == FaultLevel.MANUALLY_SEPARATE_NPU.value]
        await in_store_thread(
            self.store.isolations.release, chip, at_ms, by, level=FaultLevel.MANUALLY_SEPARATE_NPU.value
        )
        self.published.release(chip, [stored_reason(row) for row in rows])


def stored_reason(row: EscalationRow) -> Reason:
    return Reason(row.code, FaultLevel(row.level), row.upgrade_type, row.upgrade_time_ms)
