"""The device-info ConfigMap `kube-system/mindx-dl-deviceinfo-<node>`: read, diff, write.

Each sync reads the ConfigMap, hands an administrator's ManuallySeparateNPU edits to the reactor
(and waits until they are applied), then renders what the reactor published and writes it when
it differs from the last write (optimistic concurrency: a conflict re-reads). At most one sync
per write interval, and a rewrite of unchanged content once per refresh period. Reasons released
since the last write are announced once the write that removed them is in.

With a cluster, the ConfigMap is watched by name (`follow`): "reads" take the watch's copy, an
administrator's edit wakes a sync, and the server is read again only after a conflict or while the
watch has not listed it (then every POLL_S, as without a watch). At rest the writer asks nothing
of the API server but the refresh rewrite.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Protocol

from ascend_common.adapters.kube.configmaps import ConfigMaps, ConfigMapState, Conflict, FollowedConfigMap
from ascend_common.adapters.kube.events import MAX_MESSAGE
from ascend_common.clock import Clock

from fault_manager.deviceinfo.configmap import MANUALLY_SEPARATE_KEY, parse_manually_separated, upgrade_reasons_json
from fault_manager.deviceinfo.faultlist import upgrade_reasons
from fault_manager.events.fault_events import FaultEvents
from fault_manager.publishing.reports import DeviceInfo, device_info
from fault_manager.reactor.published import Published

log = logging.getLogger(__name__)
NAMESPACE = "kube-system"
LABELS = {"mx-consumer-cim": "true"}
CONFLICT_RETRIES = 5
POLL_S = 5.0  # reads without a watch (offline, a watch not listed yet), and the pace after a failed sync
# A fault rarely comes alone (a card's chips, a storm on every chip): the first change after a quiet
# spell waits this long for the rest of its burst, so that one write carries them all instead of the
# first alone and the rest a write interval later.
BURST_SETTLE_S = 0.1


class IsolationEdits(Protocol):
    """The reactor's inputs the writer sends (fault_manager.reactor.inputs.Inbox)."""

    async def written_isolations(self, data: Mapping[str, str]) -> set[str]: ...

    async def admin_edits(self, written: set[str], listed: set[str]) -> set[str]: ...


def configmap_name(node_name: str) -> str:
    return f"mindx-dl-deviceinfo-{node_name}"


def sync_wait(since_last_sync: float, write_interval: float, *, woken: bool) -> float:
    """How long to wait before the next sync: one sync (a read, and a write if the content changed)
    per write interval, not only one write, as every pod event asks for one and on a busy node most
    find no change; and a sync a change woke waits for the rest of its burst."""
    wait = write_interval - since_last_sync
    if woken:
        wait = max(wait, min(BURST_SETTLE_S, write_interval))
    return max(0.0, wait)


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
        follow: FollowedConfigMap | None = None,
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
        self.follow = follow
        # Our last write and the watch's change count when it was made: until the watch reports a
        # change (its echo or a later edit), it is the newest state there is.
        self._wrote: tuple[ConfigMapState, int] | None = None
        self._failed = False

    async def run(self) -> None:
        # Never publish a node before its inventory is known: a first write with the lists empty tells
        # ClusterD and Volcano, for a moment, that the node has no NPU.
        await self.published.inventory.wait()
        wanted = self.published.write_wanted
        if self.follow is not None:
            self.follow.on_change.append(wanted.set)  # an administrator's edit (or our write's echo)
            self.follow.start()
        try:
            await self._sync_forever(wanted)
        finally:
            if self.follow is not None:
                await self.follow.stop()

    def idle_wait(self) -> float:
        """Seconds to sleep with nothing asked: until the refresh rewrite while the watch tells of
        edits; POLL_S without one, and after a failed sync."""
        if self._failed or self.follow is None or not self.follow.synced:
            return min(self.refresh_period, POLL_S)
        return max(0.0, self.refresh_period - (time.monotonic() - self._last_write))

    async def _sync_forever(self, wanted: asyncio.Event) -> None:
        # The first sync at once, with no burst to wait for: an administrator's edit is honoured
        # only after our first write, and readers wait for it.
        woken = False
        while True:
            wait = sync_wait(time.monotonic() - self._last_sync, self.write_interval, woken=woken)
            wanted.clear()
            if wait > 0:
                await asyncio.sleep(wait)
            self._last_sync = time.monotonic()
            try:
                await self.sync()
                self._failed = False
            except Exception as exc:  # keep writing later; the next change or refresh retries
                self._failed = True
                log.error("device-info ConfigMap not written", extra={"configmap": self.name, "error": str(exc)})
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.idle_wait()):
                    await wanted.wait()
            woken = wanted.is_set()

    async def sync(self) -> bool:
        """Honour an administrator's ManuallySeparateNPU edits, then write if anything changed."""
        reread = False
        for _ in range(CONFLICT_RETRIES):
            current = await self.configmaps.get(NAMESPACE, self.name) if reread else await self._current()
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
            heard = self.follow.version if self.follow is not None else 0
            try:
                rv = await self.configmaps.put(
                    NAMESPACE, self.name, data, LABELS, current.resource_version if current else None
                )
            except Conflict:
                log.info("device-info ConfigMap changed under us; re-reading", extra={"configmap": self.name})
                reread = True
                continue
            if self.follow is not None and self.follow.version == heard:
                self._wrote = (ConfigMapState(data, dict(LABELS), rv), heard)
            self._last_written = content
            self._last_write = time.monotonic()
            # What was written, not the state now: an isolation made during the write is not in it.
            self._written_manual = set(parse_manually_separated(data[MANUALLY_SEPARATE_KEY]))
            self._announce_released(released)
            return True
        raise RuntimeError(f"{self.name}: still conflicting after {CONFLICT_RETRIES} tries")

    async def _current(self) -> ConfigMapState | None:
        """The ConfigMap as it stands: the watch's copy (or our own write, newer than anything the
        watch has said since), or a read of the server when there is no watch or it has not listed."""
        follow = self.follow
        if follow is None or not follow.synced:
            return await self.configmaps.get(NAMESPACE, self.name)
        if self._wrote is not None and self._wrote[1] == follow.version:
            return self._wrote[0]
        self._wrote = None
        return follow.state()

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
