"""A3 switch faults: the active ones, their levels (SwitchFaultCode.json) and SwitchInfoCfg.

Kept in memory and rebuilt from the exporter's snapshot (its `switch_faults`) on every
reconcile, so a restart of either side loses nothing that is still active.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ascend_common.faults import SwitchFaultLevel, SwitchFaultTable, most_serious_switch, switch_code_level
from ascend_common.schemas.exporter import Assertion, SwitchFaultData

from fault_manager.deviceinfo.configmap import SwitchEvent, SwitchReport

log = logging.getLogger(__name__)
ASSERTION_CODES = {Assertion.RECOVER: 0, Assertion.OCCUR: 1, Assertion.ONCE: 2}


def key_of(data: SwitchFaultData) -> str:
    """`<code>_<switch chip>_<port>`: the key of FaultTimeAndLevelMap (contract section 6)."""
    return f"{data.assembled_fault_code}_{data.switch_chip_id}_{data.switch_port_id}"


@dataclass
class SwitchFaults:
    active: dict[str, tuple[SwitchFaultData, int]] = field(default_factory=dict)  # key -> (event, first seen ms)

    def apply(self, data: SwitchFaultData, at_ms: int) -> bool:
        """An occur or recover; True when the active set changed."""
        key = key_of(data)
        if data.assertion is Assertion.RECOVER:
            return self.active.pop(key, None) is not None
        if data.assertion is Assertion.OCCUR and key not in self.active:
            self.active[key] = (data, at_ms)
            return True
        return False

    def replace(self, current: list[SwitchFaultData], at_ms: int) -> None:
        """The exporter's snapshot: keep first-seen times of faults still active, drop the rest."""
        kept = {key_of(d): (d, self.active[key_of(d)][1] if key_of(d) in self.active else at_ms) for d in current}
        self.active = kept

    def level(self, table: SwitchFaultTable, data: SwitchFaultData) -> SwitchFaultLevel:
        try:
            found = switch_code_level(table, data.assembled_fault_code)
        except ValueError:
            found = None
        # A code the table does not list is reported, and handled like the reference: not at all.
        return found if found is not None else SwitchFaultLevel.NOT_HANDLE

    def report(self, table: SwitchFaultTable) -> SwitchReport:
        levels = {key: self.level(table, data) for key, (data, _) in self.active.items()}
        worst = most_serious_switch(levels.values())
        events = tuple(
            SwitchEvent(
                event_type=d.event_type, assembled_fault_code=d.assembled_fault_code,
                peer_port_device=d.peer_port_device, peer_port_id=d.peer_port_id, switch_chip_id=d.switch_chip_id,
                switch_port_id=d.switch_port_id, severity=d.severity, assertion=ASSERTION_CODES[d.assertion],
                alarm_raised_time=d.alarm_raised_time,
            )
            for key, (d, _) in sorted(self.active.items())
        )  # fmt: skip
        return SwitchReport(
            events=events,
            fault_level=worst.level_name if worst is not None else "",
            node_status=worst.node_status if worst is not None else "Healthy",
            # The fault's own alarm time, as the reference's GetSwitchFaultInfo writes it (the library
            # stamps it when the switch raised the fault, which may be long before we saw it).
            time_and_level={key: (d.alarm_raised_time, levels[key].level_name) for key, (d, _) in self.active.items()},
        )
