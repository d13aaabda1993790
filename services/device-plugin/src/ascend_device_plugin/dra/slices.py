"""Keeps this node's ResourceSlice in step with the chips and their health.

Woken by the same ViewBoard change that wakes the device plugin's ListAndWatch streams (the
resource manager publishes the physical resource's devices with their health), and by the driver
when the chips the other API holds change (`--kubelet-api both`); the list-watch period bounds a
wait otherwise. Each wake renders the pool (dra.slice_devices) and writes it only when it differs from
what was written: a new generation, replacing the slice at the resourceVersion read (a 409 reads
it again). The slice is this node's only: its name, nodeName and pool are the node's.

Device taints: whether the apiserver keeps them is not in its discovery (v1 is served from 1.34
with the DRADeviceTaints gate on or off; 1.33's v1beta1 has the field, 1.32's does not). A server
that does not keep them drops the field on write, silently (ResourceSlice strategy
dropDisabledFields with the gate off; an unknown field on 1.32), so the first write that would
taint a chip is sent as a dry run first: taints in the answer, they are kept, and the chip stays
in the slice tainted; none, the driver leaves faulty chips out instead, as on 1.32. The answer is
kept until the next registration with the kubelet (which follows a kubelet restart, often an
upgrade), then asked again. A dry run, so that a faulty chip is never offered untainted, not even
for one generation; and a dry-run create under a generated name, never an update of our slice: an
update keeps the taints whatever the gate when the stored slice has some (dropDisabledFields spares
a field the old object uses), so after the gate is turned off it would answer "kept" while the
scheduler, gate off, ignores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ascend_common.adapters.clients.backoff import Backoff
from ascend_common.adapters.kube.client import KubeApiError

from ascend_device_plugin.dra.resource_api import ResourceApi, SliceConflict
from ascend_device_plugin.dra.slice_devices import (
    DeviceTaint,
    DraDevice,
    dra_devices,
    pool_devices,
    resource_slice,
    slice_name,
    written_taints,
)
from ascend_device_plugin.inventory.snapshot import InventorySource
from ascend_device_plugin.inventory.views import ViewBoard

log = logging.getLogger(__name__)

# After a registration, read the slice back again at these delays: the kubelet's wipe runs in the
# background, retried with a 1 s doubling backoff (registration.go wipeResourceSlices), ordered
# against nothing, so it may land after the read-back the registration kicked.
REVERIFY_AFTER_S = (1.0, 3.0, 7.0, 15.0, 31.0)


class SlicePublisher:
    def __init__(
        self,
        node: str,
        resources: InventorySource,
        board: ViewBoard,
        api: ResourceApi,
        *,
        period: float,
        withheld: Callable[[], frozenset[str]] = frozenset,
        on_written: Callable[[int], None] = lambda devices: None,
        noexecute_levels: Collection[str] = (),
    ) -> None:
        self.node = node
        self.resources = resources
        self.board = board
        self.api = api
        self.period = period
        self._withheld = withheld  # device names the other API holds: not offered here
        self._on_written = on_written  # told the device count of each generation written (metrics)
        self._noexecute = noexecute_levels
        self.taints_served: bool | None = None  # None: not known yet (asked with the first taint)
        self._taints_since: dict[tuple[str, DeviceTaint], str] = {}  # timeAdded the apiserver gave each
        self._wake = asyncio.Event()
        self.published: tuple[DraDevice, ...] | None = None  # what the slice holds, as last written
        self.generation = 0
        # The kubelet deletes the node's slices when it starts and when a driver deregisters; both
        # end with our driver registering again, which kicks a read-back (`verify`) and a few more
        # over the next half minute (REVERIFY_AFTER_S: the wipe is asynchronous and may land after
        # the first). A slow read-back besides catches anyone else's deletion without a GET per wake
        # on every node.
        self._verify = False
        self._verify_period = max(60.0, 10 * period)
        self._verified_at = time.monotonic()
        self._reverify_at: list[float] = []  # monotonic times of the read-backs still due after a registration
        self._resource_version: str | None = None  # of our last write; None: read before writing

    def kick(self, *, verify: bool = False) -> None:
        """Look at the pool again soon; `verify`: read the slice back even if the pool did not change."""
        self._verify = self._verify or verify
        if verify:
            self.taints_served = None
            now = time.monotonic()
            self._reverify_at = [now + delay for delay in REVERIFY_AFTER_S]
        self._wake.set()

    def devices(self) -> list[DraDevice]:
        inventory = self.resources.inventory
        withheld = self._withheld()
        healthy = {phy: chip.healthy and chip.name not in withheld for phy, chip in inventory.chips.items()}
        faults = (
            {phy: chip.fault for phy, chip in inventory.chips.items() if not chip.healthy and chip.name not in withheld}
            if self.taints_served is not False
            else None
        )
        devices = dra_devices(inventory.reported.values(), inventory.super_pod)
        return pool_devices(devices, healthy, faults, self._noexecute)

    async def run(self) -> None:
        backoff = Backoff(0.2, 10.0)
        while True:
            version = self._seen_version()
            try:
                await self.sync()
                backoff.reset()
            except (KubeApiError, SliceConflict) as exc:
                delay = backoff.next()
                log.warning("resourceslice not written", extra={"node": self.node, "error": str(exc),
                                                                "retry_s": round(delay, 3)})  # fmt: skip
                await asyncio.sleep(delay)
                continue
            await self._wait(version)

    def _resource(self) -> str | None:
        rtype = self.resources.inventory.physical_type
        return rtype.value if rtype is not None else None

    def _seen_version(self) -> int:
        resource = self._resource()
        view = self.board.get(resource) if resource is not None else None
        return view.version if view is not None else -1

    async def _wait(self, version: int) -> None:
        resource = self._resource()
        timeout = self.period
        if self._reverify_at:
            timeout = max(0.0, min(timeout, self._reverify_at[0] - time.monotonic()))
        change = (
            self.board.wait_change(resource, version, timeout)
            if resource is not None
            else self.board.wait_resources(timeout)
        )
        waits = [asyncio.ensure_future(change), asyncio.ensure_future(self._wake.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._wake.clear()

    async def sync(self) -> bool:
        """Write the slice if the pool changed since it was last written; True when it was written.

        The slice is replaced at the resourceVersion of our own last write, without reading it first
        (one request per change on the fault path); it is read only on the first write, a verify, or
        a 409 (someone else changed it), and then written at once from what was read.
        """
        if self.resources.inventory.physical_type is None:
            return False  # no chip yet: an empty slice now would only be replaced in a moment
        devices = tuple(self.devices())
        now = time.monotonic()
        due = bool(self._reverify_at) and self._reverify_at[0] <= now
        self._reverify_at = [at for at in self._reverify_at if at > now]
        verify = self._verify or due or now - self._verified_at > self._verify_period
        if devices == self.published and not verify:
            return False
        version = await self.api.version()
        if self.taints_served is None and any(d.taints for d in devices):
            await self._ask_taints_served(devices, version)
            devices = tuple(self.devices())
        if (verify or self._resource_version is None) and not await self._read(devices):
            return False
        try:
            await self._write(devices, version)
        except SliceConflict:
            await self._read(devices)
            await self._write(devices, version)
        return True

    async def _read(self, devices: tuple[DraDevice, ...]) -> bool:
        """Read the slice back; False when it holds `devices` as last written (nothing to do)."""
        current = await self.api.read_slice(slice_name(self.node))
        self._verify, self._verified_at = False, time.monotonic()
        if current is None:
            self._resource_version = None
            return True
        if devices == self.published and _holds(current, self.generation, devices):
            return False
        self._resource_version = str((current.get("metadata") or {}).get("resourceVersion") or "") or None
        self.generation = max(self.generation, _generation(current))
        self._taints_since = written_taints(current) or {}
        return True

    async def _ask_taints_served(self, devices: tuple[DraDevice, ...], version: str) -> None:
        probe = resource_slice(self.node, devices, self.generation + 1, version)
        meta = {k: v for k, v in probe["metadata"].items() if k != "name"}
        probe = {**probe, "metadata": {**meta, "generateName": f"{probe['metadata']['name']}-probe-"}}
        answered = await self.api.write_slice(probe, None, dry_run=True)
        self.taints_served = written_taints(answered) is not None
        log.info(
            "device taints " + ("kept" if self.taints_served else "dropped: faulty chips leave the slice"),
            extra={"node": self.node, "version": version},
        )

    async def _write(self, devices: tuple[DraDevice, ...], version: str) -> None:
        body = resource_slice(self.node, devices, self.generation + 1, version, self._taints_since)
        written = await self.api.write_slice(body, self._resource_version)
        self._taints_since = written_taints(written) or {}
        self.generation += 1
        self.published = devices
        self._resource_version = str((written.get("metadata") or {}).get("resourceVersion") or "") or None
        self._on_written(len(devices))
        log.info(
            "resourceslice written",
            extra={"node": self.node, "generation": self.generation, "devices": [d.name for d in devices]},
        )


def _holds(obj: Mapping[str, Any], generation: int, devices: tuple[DraDevice, ...]) -> bool:
    """The slice as read is the one last written: its generation and device names."""
    spec = obj.get("spec") or {}
    names = [d.get("name") for d in spec.get("devices") or [] if isinstance(d, Mapping)]
    return _generation(obj) == generation and names == [d.name for d in devices]


def _generation(obj: Any) -> int:
    pool = ((obj.get("spec") or {}).get("pool") or {}) if isinstance(obj, Mapping) else {}
    value = pool.get("generation", 0)
    return value if isinstance(value, int) else 0
