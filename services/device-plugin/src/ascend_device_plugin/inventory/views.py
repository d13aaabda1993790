"""What each resource advertises, versioned, with a wake-up for ListAndWatch streams.

The resource manager publishes a new `ResourceView` when a resource's devices or their
health change; every open stream of that resource wakes and sends it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass


@dataclass(frozen=True)
class AdvertisedDevice:
    id: str
    healthy: bool
    numa_node: int | None = None


@dataclass(frozen=True)
class ResourceView:
    resource: str  # the type, e.g. "Ascend910" or "Ascend910-2c"; the name is huawei.com/<resource>
    devices: tuple[AdvertisedDevice, ...]
    version: int


class ViewBoard:
    """The current view of every resource; lives on the event loop thread."""

    def __init__(self) -> None:
        self._views: dict[str, ResourceView] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._resources_changed = asyncio.Event()

    def resources(self) -> list[str]:
        return sorted(self._views)

    def get(self, resource: str) -> ResourceView | None:
        return self._views.get(resource)

    def publish(self, resource: str, devices: tuple[AdvertisedDevice, ...]) -> bool:
        """Set a resource's devices; True (and streams woken) only when something changed."""
        old = self._views.get(resource)
        if old is not None and old.devices == devices:
            return False
        self._views[resource] = ResourceView(resource, devices, (old.version + 1) if old else 1)
        if old is None:
            self._resources_changed.set()
            self._resources_changed = asyncio.Event()
        event = self._changed.get(resource)
        self._changed[resource] = asyncio.Event()
        if event is not None:
            event.set()
        return True

    async def wait_change(self, resource: str, seen_version: int, within: float) -> None:
        """Return when the resource has a version newer than `seen_version`, or after `within` s."""
        view = self._views.get(resource)
        if view is not None and view.version != seen_version:
            return
        event = self._changed.setdefault(resource, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await event.wait()

    async def wait_resources(self, within: float) -> None:
        event = self._resources_changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await event.wait()
