"""The engine rebuilt from SQLite at start: manual isolation, then every event in the policy horizon."""

from __future__ import annotations

from ascend_common.clock import Clock
from ascend_common.faults.codes import HBM_DOUBLE_BIT_CODE

from fault_manager.policy.engine import BY_ADOPTION, BY_RULE, UPGRADE_AUTOFILL, FaultEngine, stored_escalation
from fault_manager.reactor.association import HbmAssociation, replay
from fault_manager.store import Store, in_store_thread


async def restore(engine: FaultEngine, store: Store, clock: Clock, association: HbmAssociation | None = None) -> bool:
    """Rebuild `engine`'s chips; returns whether the database held no state for the node (new, or
    its hostPath lost): then what the device-info ConfigMap says is isolated, and why, is adopted
    before our first write.

    With `association` (and the policy's 80E01801 FaultDuration rule), the stored events pass the
    HBM / AI-core association again in the order they arrived: what it dropped stays out, and
    what it still holds is held there for the reactor's timer."""
    associating = association is not None and engine.policy.customization.duration_rule(HBM_DOUBLE_BIT_CODE) is not None
    now_ms = int(clock.now() * 1000)
    manual = await in_store_thread(store.manual.chips)
    states = await in_store_thread(store.states.all)
    since_ms = int((clock.now() - engine.real_time(engine.keep_s)) * 1000)
    for name in sorted(set(states) | manual):
        rows = await in_store_thread(store.events.of_chip, name, since_ms)
        chip = engine.chip(name, rows[0].logic_id if rows else -1, rows[0].phy_id if rows else -1)
        chip.manual = name in manual
        last = await in_store_thread(store.manual.audit, name, 1)
        chip.manual_by_rule = chip.manual and bool(last) and last[0].separated and last[0].set_by == BY_RULE
        if chip.manual and last and last[0].separated and last[0].set_by == BY_ADOPTION:
            held = await in_store_thread(store.isolations.escalations, True, name)
            # A FaultAutofill reason older than the adoption came with the ConfigMap and releases the
            # chip by its rule; one of ours (made at or after it) only fills in for a missing reason.
            adopted = [r for r in held if r.upgrade_type != UPGRADE_AUTOFILL or r.upgrade_time_ms < last[0].at_ms]
            engine.adopt(name, [stored_escalation(row) for row in adopted])
        if last and not last[0].separated:
            # Frequency windows restart at a release: without this a restart would count the
            # occurrences before it again and isolate the chip anew.
            chip.released_at = engine.policy_time(last[0].at_ms / 1000)
        if association is not None and associating:
            arrived = sorted(rows, key=lambda r: (r.recorded_at_ms, r.id or 0))
            kept = {r.event_id for r in replay(association, arrived, now_ms).apply}
            rows = [r for r in rows if r.event_id in kept]
        for row in rows:
            engine.apply(name, row.code, row.assertion, row.severity, row.raised_at_ms / 1000)
    return not states and not manual
