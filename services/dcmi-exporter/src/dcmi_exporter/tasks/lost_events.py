"""Fault events the library's subscription may have lost: when the exporter looks for them, and how
the codes it derives from what it finds reach the poller. One rule for every plane (the 950's UB and
UBoE ports, the 910's RoCE link), as the reference's HandleLost*FaultEvents share theirs
(ascendcommon.go, called each cycle by manager.go mendSubscribeFaultEvents).

A chip's plane is looked for at its first round (the reference's first flush), after a reset, while
the subscription has failed and, for the parameter plane, once its network has been unhealthy for
more than 5 minutes. Its state is read at most once per 5 minutes per chip (the reference's
rate.Every(5 min / 1) limiter), except when the library's own codes of that plane change (an event,
read now) and after a reset: what was read before it says nothing about the chip after it (the
reference answers from its pre-reset cache within the 5 minutes; ours reads).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping

from ascend_common.clock import Clock
from ascend_common.schemas.exporter import (
    BOOT_STATUS_READY,
    Assertion,
    Chip,
    ChipState,
    EventSource,
    FaultEventData,
)

from dcmi_exporter.node.poller import ChipPoller

log = logging.getLogger(__name__)

QUERY_PERIOD_S = 300.0  # rate.Every(5 min / 1): one state read per chip per 5 minutes
NETWORK_UNHEALTHY_S = 300.0  # networkMoreThanFiveMin


class LostEventRule:
    """Per chip, for one task's rounds: whether a lost event is looked for now, and whether the plane's
    state may be read now. A task calls `lost` once per chip per round."""

    def __init__(self, poller: ChipPoller) -> None:
        self.poller = poller
        self._seen: set[int] = set()  # chips past their first round (the reference's first flush)
        self._epochs: dict[int, int] = {}  # the poller's reset epoch of each chip at our last look
        self._net_bad_since: dict[int, float] = {}
        self._read_at: dict[int, float] = {}  # clock.monotonic() of the last read
        self._read_for: dict[int, frozenset[str]] = {}  # the library's plane codes at that read
        self._reset: set[int] = set()  # chips reset since their last read

    def lost(self, chip: Chip, subscription_failed: bool) -> bool:
        """The first round of this chip, the first round it is ready after a reset, or no subscription."""
        first = chip.logic_id not in self._seen
        self._seen.add(chip.logic_id)
        return self._after_reset(chip) or first or subscription_failed

    def _after_reset(self, chip: Chip) -> bool:
        """True once per reset the poller noticed (however briefly the chip was away between two of our
        rounds), at the first round the chip is ready again."""
        epoch = self.poller.reset_epoch(chip.logic_id)
        seen = self._epochs.setdefault(chip.logic_id, epoch)
        if epoch == seen or not _ready(chip):
            return False  # no reset since our last look, or still booting: look once it is back
        self._epochs[chip.logic_id] = epoch
        self._reset.add(chip.logic_id)
        return True

    def network_bad_long(self, chip: Chip, now: float) -> bool:
        """Whether the chip's network has been unhealthy for more than 5 minutes (clock.monotonic())."""
        if chip.network_healthy is False:
            return now - self._net_bad_since.setdefault(chip.logic_id, now) > NETWORK_UNHEALTHY_S
        self._net_bad_since.pop(chip.logic_id, None)
        return False

    def due(self, logic: int, plane: frozenset[str], now: float) -> bool:
        """Whether the plane's state may be read now; a True answer counts as the read."""
        recent = logic in self._read_at and now - self._read_at[logic] < QUERY_PERIOD_S
        if recent and self._read_for.get(logic) == plane and logic not in self._reset:
            return False
        # Never read, the library's codes changed (an event: read now), a reset since, or 5 minutes passed.
        self._read_at[logic], self._read_for[logic] = now, plane
        self._reset.discard(logic)
        return True


def _ready(chip: Chip) -> bool:
    boot = chip.dynamic.boot_status if chip.dynamic is not None else None
    return boot is None or not boot.is_ok or boot.value == BOOT_STATUS_READY


class DerivedCodes:
    """Raises and clears, through the poller, the codes one task derives (its `owned` codes), and logs
    each change naming the chip."""

    def __init__(
        self, poller: ChipPoller, clock: Clock, source: EventSource, owned: Collection[str], what: str
    ) -> None:
        self.poller = poller
        self.clock = clock
        self.source = source
        self.owned = owned
        self.what = what  # "UB code", "RoCE code": the log lines' subject

    def current(self, logic: int) -> list[str]:
        return [c for c in self.poller.derived(logic) if c in self.owned]

    def apply(self, logic: int, target: Iterable[str], details: Mapping[str, object]) -> bool:
        """Make the chip's derived codes of this task `target`; `details` (log fields) say what they come from.
        False when the chip is not OK now: nothing changed."""
        chip = self.poller.snapshot.by_logic.get(logic)
        if chip is None or chip.state is not ChipState.OK:
            return False  # it stopped answering while its state was read: its codes publish nothing
        wanted = list(target)
        current = self.current(logic)
        fields = {"logic_id": logic, "chip": chip.name}
        for code in current:
            if code not in wanted:
                log.info(f"{self.what} cleared", extra={**fields, "code": code})
                self.poller.set_derived(logic, self._fault(code, Assertion.RECOVER))
        for code in wanted:
            if code not in current:
                log.warning(f"{self.what} raised", extra={**fields, "code": code, **details})
                self.poller.set_derived(logic, self._fault(code, Assertion.OCCUR))
        return True

    def _fault(self, code: str, assertion: Assertion) -> FaultEventData:
        return FaultEventData(
            code=code,
            assertion=assertion,
            severity=None,
            source=self.source,
            raised_at_ms=int(self.clock.now() * 1000),
        )
