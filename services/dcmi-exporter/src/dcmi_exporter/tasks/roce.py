"""The 910's lost RoCE link-down events (issue 26 item 2), the shell: every poll period, reads the link
state of the 910 chips whose event may have been lost (`hccn_tool -i <phy> -link -g` on the dcmi
backend) and raises or clears 81078603 through the poller. The rule is `snapshot.roce_codes`; when to
look and how often to read is `lost_events`, shared with the 950's UB codes.

A chip is read only while its event may have been lost (first round, after a reset, subscription
failed, network unhealthy for over 5 minutes) or while we list the code, at most once per 5 minutes,
and never while the library lists a parameter-plane code itself (the reference's
queryParameterPlaneStatusWithoutFaultCode).
"""

from __future__ import annotations

import logging

from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.chip_traits import Network, traits
from ascend_common.clock import Clock
from ascend_common.faults.codes import LINK_DOWN_CODE, NETWORK_CODES
from ascend_common.schemas.exporter import Chip, ChipState, EventSource, SubscriptionState

from dcmi_exporter.backends.base import RoceLinkProbe
from dcmi_exporter.backends.failing import FailingChips
from dcmi_exporter.node.poller import ChipPoller
from dcmi_exporter.node.snapshot import RoceChipInput, codes_of, roce_codes
from dcmi_exporter.tasks.lost_events import DerivedCodes, LostEventRule
from dcmi_exporter.tasks.periodic import ChipRounds, read_chips

log = logging.getLogger(__name__)


class RoceLinkTask(ChipRounds):
    name = "roce-link"
    failed = "RoCE link round failed"

    def __init__(
        self,
        poller: ChipPoller,
        probe: RoceLinkProbe,
        interval_s: float,
        clock: Clock,
        tasks: TaskScope,
        deadline_s: float | None = None,
    ) -> None:
        super().__init__(poller, interval_s, clock, tasks, deadline_s)
        self.probe = probe
        self._link: dict[int, str | None] = {}  # the latest read; None: it failed
        self._rule = LostEventRule(poller)
        self._codes = DerivedCodes(poller, clock, EventSource.ROCE, frozenset({LINK_DOWN_CODE}), "RoCE code")
        self._failing = FailingChips(
            log, "RoCE link state unreadable; its lost events cannot be found", "RoCE link state readable again"
        )

    async def tick(self) -> None:
        snap = self.poller.snapshot
        # A chip whose code list cannot be read is left alone (the reference returns when
        # GetDeviceAllErrorCode fails): whether the library lists the code is not known.
        chips = [
            c
            for c in snap.chips
            if c.family is not None
            and traits(c.family).network is Network.ROCE
            and c.state is ChipState.OK
            and c.dynamic
            and c.dynamic.error_codes.is_ok
        ]
        if not chips:
            return
        subscription_failed = snap.node.subscription is SubscriptionState.POLLING
        now = self.clock.monotonic()
        inputs: dict[int, RoceChipInput] = {}
        to_read: list[Chip] = []
        for chip in chips:
            logic = chip.logic_id
            derived = set(self.poller.derived(logic))
            raw = frozenset(c for c in codes_of(chip) if c not in derived)
            held = LINK_DOWN_CODE in derived
            # Both asked every round: each keeps its own state (the first round, the unhealthy-since time).
            lost = self._rule.lost(chip, subscription_failed)
            lost = self._rule.network_bad_long(chip, now) or lost
            plane = raw & NETWORK_CODES
            if not plane and (held or lost) and self._rule.due(logic, plane, now):
                to_read.append(chip)
            inputs[logic] = RoceChipInput(raw=raw, held=held, lost=lost)
        read = await read_chips(to_read, self._read, self.deadline_s, self._failing)
        for chip, link in zip(to_read, read, strict=True):
            self._link[chip.logic_id] = link
        for logic, i in inputs.items():
            link = self._link.get(logic)
            target = roce_codes(RoceChipInput(raw=i.raw, held=i.held, link=link, lost=i.lost))
            self._codes.apply(logic, target, {"link": link})

    async def _read(self, chip: Chip) -> str | None:
        try:
            link = await self.probe.link_status(chip)
        except Exception as exc:  # the tool failed, hung or printed garbage: this chip, this round
            self._failing.failed(chip, str(exc))
            return None
        self._failing.succeeded(chip)
        return link
