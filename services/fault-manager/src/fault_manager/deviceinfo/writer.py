"""The device-info ConfigMap `kube-system/mindx-dl-deviceinfo-<node>`: read, diff, write.

Each sync reads the ConfigMap, hands an administrator's ManuallySeparateNPU edits to the reactor
(and waits until they are applied), then renders what the reactor published and writes it when
it differs from the last write (optimistic concurrency: a conflict re-reads). At most one sync
per write interval, and a rewrite of unchanged content once per refresh period. Reasons released
since the last write are announced once the write that removed them is in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Protocol

from ascend_common.adapters.kube.configmaps import ConfigMaps, Conflict
from ascend_common.adapters.kube.events import MAX_MESSAGE
from ascend_common.clock import Clock

from fault_manager.deviceinfo.configmap import MANUALLY_SEPARATE_KEY, parse_manually_separated, upgrade_reasons_json
from fault_manager.deviceinfo.faultlist import upgrade_reasons
from fault_manager.deviceinfo.reports import DeviceInfo, device_info
from fault_manager.events.fault_events import FaultEvents
from fault_manager.reactor.published import Published

log = logging.getLogger(__name__)
NAMESPACE = "kube-system"
LABELS = {"mx-consumer-cim": "true"}
CONFLICT_RETRIES = 5


class IsolationEdits(Protocol):
    """The reactor's inputs the writer sends (fault_manager.reactor.inputs.Inbox)."""

    async def written_isolations(self, data: Mapping[str, str]) -> set[str]: ...

    async def admin_edits(self, written: set[str], listed: set[str]) -> set[str]: ...


def configmap_name(node_name: str) -> str:
    return f"mindx-dl-deviceinfo-{node_name}"


class DeviceInfoWriter:
    def __init__(
        self,
        configmaps: ConfigMaps,
        published: Published,
        edits: IsolationEdits,
        clock: Clock,
        node_name: str,
        events: FaultEvents | None,
        *,
        write_interval: float = 1.0,
        refresh_period: float = 300.0,
    ) -> None:
        self.configmaps = configmaps
        self.published = published
        self.edits = edits
        self.clock = clock
        self.name = configmap_name(node_name)
        self.events = events
        self.write_interval = write_interval
        self.refresh_period = refresh_period
        self._last_written: DeviceInfo | None = None
        self._last_write = 0.0
        self._last_sync = 0.0  # the last read of the ConfigMap (and write, if it wrote)
        # What ManuallySeparateNPU said after our last write (None: not read yet): what differs from
        # it in the ConfigMap is an administrator's edit.
        self._written_manual: set[str] | None = None

    async def run(self) -> None:
        # Never publish a node before its inventory is known: a first write with the lists empty tells
        # ClusterD and Volcano, for a moment, that the node has no NPU.
        await self.published.inventory.wait()
        wanted = self.published.write_wanted
        wanted.set()  # then at once: an administrator's edit is honoured only after our first write
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self.refresh_period, 5.0)):
                    await wanted.wait()
            wanted.clear()
            # One sync (a read, and a write if the content changed) per write interval, not only
            # one write: every pod event asks for a sync, and on a busy node most find no change.
            wait = self.write_interval - (time.monotonic() - self._last_sync)
            if wait > 0:
                await asyncio.sleep(wait)
            self._last_sync = time.monotonic()
            try:
                await self.sync()
            except Exception as exc:  # keep writing later; the next change or refresh retries
                log.error("device-info ConfigMap not written", extra={"configmap": self.name, "error": str(exc)})

    async def sync(self) -> bool:
        """Honour an administrator's ManuallySeparateNPU edits, then write if anything changed."""
        for _ in range(CONFLICT_RETRIES):
            current = await self.configmaps.get(NAMESPACE, self.name)
            if current is not None:
                if self._written_manual is None:
                    self._written_manual = await self.edits.written_isolations(current.data)
                await self._admin_edits(current.data.get(MANUALLY_SEPARATE_KEY, ""))
            released = self.published.released_pending()  # what this write leaves out
            state = self.published.state
            content = device_info(state)
            refresh_due = time.monotonic() - self._last_write >= self.refresh_period
            if current is not None and content == self._last_written and not refresh_due:
                self._announce_released(released)  # the write that removed them has gone out already
                return False
            data = content.render(update_time_s=int(self.clock.now()))
            try:
                await self.configmaps.put(
                    NAMESPACE, self.name, data, LABELS, current.resource_version if current else None
                )
            except Conflict:
                log.info("device-info ConfigMap changed under us; re-reading", extra={"configmap": self.name})
                continue
            self._last_written = content
            self._last_write = time.monotonic()
            # What was written, not the state now: an isolation made during the write is not in it.
            self._written_manual = set(parse_manually_separated(data[MANUALLY_SEPARATE_KEY]))
            self._announce_released(released)
            return True
        raise RuntimeError(f"{self.name}: still conflicting after {CONFLICT_RETRIES} tries")

    async def _admin_edits(self, value: str) -> None:
        assert self._written_manual is not None
        try:
            listed = set(parse_manually_separated(value, self.published.state.rtype))
        except ValueError as exc:
            log.warning("ignoring a malformed ManuallySeparateNPU", extra={"configmap": self.name, "error": str(exc)})
            return
        if listed == self._written_manual:
            self._written_manual = listed & self.published.chips()
        else:
            self._written_manual = await self.edits.admin_edits(self._written_manual, listed)

    def _announce_released(self, count: int) -> None:
        """After a ConfigMap write, one Event with every reason removed since the last (reference
        writeDeviceInfoCm -> WriteUpgradeReasonRemoveEvent)."""
        if not count:
            return
        released = self.published.take_released(count)
        spell = self.published.policy().spell
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
