"""An Atlas A3 node's switch faults (liblingqu-dcmi.so), the shell: when to call the library.

The reference (pkg/server/manager.go, pkg/device/deviceswitch) on an A3 node whose switch library
loads and initialises: subscribes to the library's fault events (3 tries, a second apart), queries
the whole fault list once at start, and then every 5 minutes, a query it skips while no switch
fault is known (the events bring new ones; the query clears what recovered unseen). Without the
subscription it queries at every device-info round instead; here, at every poll period then.

Every library call runs in the exporter's call pool under the key `switch`: a hung call costs the
switch its rounds until it returns, never a chip its reads. Faults reach the poller as the
simulator's do (`switch_fault` events and the node's `switch_faults`), which the fault-manager
renders into SwitchInfoCfg.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final, Protocol

from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.chip_traits import SwitchInfo, traits
from ascend_common.schemas.exporter import SwitchFaultData

from dcmi_exporter.backends.base import EventSink
from dcmi_exporter.backends.errors import DcmiError
from dcmi_exporter.node.calls import CallGuard
from dcmi_exporter.node.poller import ChipPoller
from dcmi_exporter.tasks.periodic import PeriodicTask, Round

log = logging.getLogger(__name__)

SWITCH_KEY: Final = "switch"  # the call pool's key of every switch library call
SUBSCRIBE_TRIES: Final = 3  # the reference's GeneralSubscribeTime
SUBSCRIBE_RETRY_S: Final = 1.0
DEFAULT_INTERVAL_S: Final = 300.0  # the reference's GetSwitchFaultCodeInterval


class SwitchSource(Protocol):
    """What the task needs of the switch library (`backends.dcmi.switch.SwitchLibrary`). Blocking."""

    def init(self) -> None: ...

    def subscribe(self, sink: EventSink) -> None: ...

    def faults(self) -> list[SwitchFaultData]: ...

    def close(self) -> None: ...


def is_a3_node(poller: ChipPoller) -> bool:
    """The reference's `RealCardType == Ascend910A3`: the node's chips are A3 ones."""
    return any(
        chip.family is not None and traits(chip.family).switch_info is SwitchInfo.WATCHED
        for chip in poller.snapshot.chips
    )


class SwitchFaultTask(PeriodicTask):
    name = "switch-faults"
    essential = False  # a node that is no A3, or whose switch library does not load, watches none

    def __init__(
        self,
        poller: ChipPoller,
        source: SwitchSource,
        guard: CallGuard,
        interval_s: float,
        tasks: TaskScope,
        *,
        fallback_period_s: float,
        subscribe_retry_s: float = SUBSCRIBE_RETRY_S,
    ) -> None:
        """`interval_s`: between two queries with the subscription live; `fallback_period_s`:
        between two queries without it (the chips' poll period)."""
        super().__init__(tasks)
        self.poller = poller
        self.source = source
        self.guard = guard
        self.interval_s = interval_s
        self.fallback_period_s = fallback_period_s
        self.subscribe_retry_s = subscribe_retry_s
        self.watching = False  # the library initialised on an A3 node
        self.subscribed = False
        self.rounds = 0  # queries asked of the library (tests)
        self._failing = False  # the last query failed (its error was logged)
        self._listed: list[str] | None = None  # the codes the last good query listed

    def schedule(self) -> list[Round]:
        period = self.interval_s if self.subscribed else self.fallback_period_s
        return [Round(self.name, period, self.tick, "switch fault round failed")]

    def closed(self) -> None:
        if self.watching:
            self.source.close()  # drops late callbacks; makes no library call

    async def begin(self) -> bool:
        """Init, subscribe, the first full query; False when the node watches no switch."""
        await self.poller.discovered.wait()
        if not is_a3_node(self.poller):
            log.info("not an Atlas A3 node: no switch faults watched")
            return False
        try:
            await self.guard.call(SWITCH_KEY, self.source.init)
        except DcmiError as exc:
            log.warning(
                "switch library unusable: switch faults are not watched",
                extra={"error": str(exc), "code": exc.code},
            )
            return False
        self.watching = True
        log.info("switch library initialised")
        self.subscribed = await self._subscribe()
        await self.query()
        return True

    async def _subscribe(self) -> bool:
        for attempt in range(1, SUBSCRIBE_TRIES + 1):
            try:
                await self.guard.call(SWITCH_KEY, lambda: self.source.subscribe(self.poller.switch_sink))
                log.info("switch fault subscription live")
                return True
            except DcmiError as exc:
                log.warning(
                    "switch fault subscription failed",
                    extra={"attempt": attempt, "error": str(exc), "code": exc.code},
                )
            if attempt < SUBSCRIBE_TRIES:
                await asyncio.sleep(self.subscribe_retry_s)
        log.error("switch fault subscription given up: the switch faults are queried every poll period")
        return False

    async def tick(self) -> None:
        """One round: query, unless the subscription is live and no switch fault is known."""
        if self.subscribed and not self.poller.switch_faults:
            log.debug("no switch fault to re-query; round skipped")
            return
        await self.query()

    async def query(self) -> None:
        """The whole fault list becomes the active set; a failed or hung call changes nothing."""
        self.rounds += 1
        try:
            faults = await self.guard.call(SWITCH_KEY, self.source.faults)
        except DcmiError as exc:
            # Once per failing spell: without the subscription the query runs every poll period.
            (log.debug if self._failing else log.error)(
                "switch fault query failed", extra={"error": str(exc), "code": exc.code}
            )
            self._failing = True
            return
        if self._failing:
            log.info("switch fault query answers again")
            self._failing = False
        self.poller.replace_switch_faults(faults)
        codes = [f.assembled_fault_code for f in faults]
        if codes != self._listed:
            # The reference's "switch of 910A3 get fault codes" line (fault dialogs look for it), here
            # when the list changes rather than at every query.
            (log.warning if codes else log.info)("switch fault codes", extra={"codes": codes})
            self._listed = codes
