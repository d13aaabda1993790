"""The 950's UB/UBoE codes, the shell: every poll period, reads the port state of the 950 chips
that need it (hccn_tool on the dcmi backend) and raises or clears the derived codes through the
poller. The rule is `snapshot.ub_codes`; this file decides when to read and what changed.

A chip's ports are read when its library plane codes (81B18603, 81078607) change, as the
reference does at each event, and otherwise at most once per 5 minutes while anything depends on
them (`lost_events`: the reference's lost-event rule and rate limit, shared with the RoCE link);
chips with no such code and no lost-event check are not read at all.
"""

from __future__ import annotations

import logging

from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.chip_traits import Network, traits
from ascend_common.clock import Clock
from ascend_common.faults.codes import UB_PORT_DOWN_CODE, UBOE_PORT_DOWN_CODE
from ascend_common.products import UBOE_BOARDS
from ascend_common.schemas.exporter import (
    Chip,
    ChipState,
    EventSource,
    SubscriptionState,
    UbPorts,
)
from ascend_common.schemas.reading import Reading

from dcmi_exporter.backends.base import UbPortsProbe
from dcmi_exporter.backends.failing import FailingChips
from dcmi_exporter.node.poller import ChipPoller
from dcmi_exporter.node.snapshot import UB_DERIVED_CODES, UbChipInput, codes_of, ub_codes
from dcmi_exporter.tasks.lost_events import QUERY_PERIOD_S, DerivedCodes, LostEventRule
from dcmi_exporter.tasks.periodic import ChipRounds, read_chips

log = logging.getLogger(__name__)

__all__ = ["QUERY_PERIOD_S", "UbCodesTask"]
PLANE_CODES = frozenset({UB_PORT_DOWN_CODE, UBOE_PORT_DOWN_CODE})


class UbCodesTask(ChipRounds):
    name = "ub-codes"
    failed = "UB codes round failed"

    def __init__(
        self,
        poller: ChipPoller,
        probe: UbPortsProbe,
        interval_s: float,
        clock: Clock,
        tasks: TaskScope,
        deadline_s: float | None = None,
    ) -> None:
        super().__init__(poller, interval_s, clock, tasks, deadline_s)
        self.probe = probe
        self._listed: dict[int, frozenset[str]] = {}  # the chip's UB/UBoE codes after our last round
        self._ports: dict[int, UbPorts | None] = {}  # the latest snapshot; None: the last read failed
        self._rule = LostEventRule(poller)
        self._codes = DerivedCodes(poller, clock, EventSource.UB, UB_DERIVED_CODES, "UB code")
        self._failing = FailingChips(
            log, "950 port state unreadable; UB codes stay as they are", "950 port state readable again"
        )

    async def tick(self) -> None:
        snap = self.poller.snapshot
        # A chip that does not answer now still counts, with what it said last, for the all-chips
        # rule (as the reference's cached codes do); it is neither read nor changed.
        chips = [
            c
            for c in snap.chips
            if c.family is not None and traits(c.family).network is Network.UB and c.dynamic is not None
        ]
        if not chips:
            return
        subscription_failed = snap.node.subscription is SubscriptionState.POLLING
        now = self.clock.monotonic()
        inputs: dict[int, UbChipInput] = {}
        to_read: list[Chip] = []
        for chip in chips:
            logic = chip.logic_id
            derived = set(self.poller.derived(logic))
            raw = frozenset(c for c in codes_of(chip) if c not in derived)
            held = self._listed.get(logic, frozenset())
            if chip.state is not ChipState.OK:
                inputs[logic] = UbChipInput(raw=raw, held=held)
                continue
            lost_ub = self._rule.lost(chip, subscription_failed)
            lost_uboe = self._uboe_board(chip) and (lost_ub or self._rule.network_bad_long(chip, now))
            plane = raw & PLANE_CODES
            if (plane or held or lost_ub or lost_uboe) and self._rule.due(logic, plane, now):
                to_read.append(chip)
            inputs[logic] = UbChipInput(raw=raw, held=held, lost_ub=lost_ub, lost_uboe=lost_uboe)
        read = await read_chips(to_read, self._read, self.deadline_s, self._failing)
        for chip, ports in zip(to_read, read, strict=True):
            self._ports[chip.logic_id] = ports
            if ports is not None:
                self.poller.set_ub_ports(chip.logic_id, Reading[UbPorts].ok(ports))
        inputs = {
            logic: UbChipInput(
                raw=i.raw, held=i.held, ports=self._ports.get(logic), lost_ub=i.lost_ub, lost_uboe=i.lost_uboe
            )
            for logic, i in inputs.items()
        }
        for logic, extra in ub_codes(inputs).items():
            self._apply(logic, inputs[logic].raw, extra)

    async def _read(self, chip: Chip) -> UbPorts | None:
        try:
            ports = await self.probe.ub_ports(chip)
        except Exception as exc:  # the tool failed, hung or printed garbage: this chip, this round
            self._failing.failed(chip, str(exc))
            return None
        self._failing.succeeded(chip)
        return ports

    @staticmethod
    def _uboe_board(chip: Chip) -> bool:
        board = chip.static.main_board_id
        return board.is_ok and board.value in UBOE_BOARDS

    def _apply(self, logic: int, raw: frozenset[str], extra: list[str]) -> None:
        ports = self._ports.get(logic)
        if self._codes.apply(logic, extra, {"ports": ports.model_dump() if ports is not None else None}):
            self._listed[logic] = frozenset((raw & UB_DERIVED_CODES) | set(extra))
