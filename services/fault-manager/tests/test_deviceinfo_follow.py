"""The device-info writer with its ConfigMap watched (`follow`): it reads the watch's copy, asks the
server again only after a conflict or while the watch has not listed, and sleeps until the refresh."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ascend_common.adapters.kube.configmaps import ConfigMapState, Conflict, OfflineConfigMaps
from ascend_common.clock import ManualClock
from ascend_common.faults import default_fault_code_table, default_fault_customization, default_switch_fault_table
from fault_manager.policy.engine import Policy
from fault_manager.publishing.writer import NAMESPACE, POLL_S, DeviceInfoWriter, configmap_name, sync_wait
from fault_manager.reactor.published import NodeState, Published
from fault_manager.reactor.verdicts import VerdictBoard

NAME = configmap_name("node-a")


@dataclass
class Counted(OfflineConfigMaps):
    """The in-memory store, counting reads and writes; `conflicts` writes meet a 409 first."""

    gets: int = 0
    puts: int = 0
    conflicts: int = 0

    async def get(self, namespace: str, name: str) -> ConfigMapState | None:
        self.gets += 1
        return await super().get(namespace, name)

    async def put(
        self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str], resource_version: str | None
    ) -> str:
        self.puts += 1
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("injected")
        return await super().put(namespace, name, data, labels, resource_version)


@dataclass
class Follow:
    """A watch of the ConfigMap that says what the test tells it."""

    store: Counted
    synced: bool = True
    version: int = 0
    on_change: list[Callable[[], None]] = field(default_factory=list)

    def state(self) -> ConfigMapState | None:
        return self.store.objects.get((NAMESPACE, NAME))  # what the server holds, read without counting

    def echo(self) -> None:
        self.version += 1

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def wait_synced(self, timeout: float) -> bool:
        return self.synced


class Edits:
    async def written_isolations(self, data: Mapping[str, str]) -> set[str]:
        return set()

    async def admin_edits(self, written: set[str], listed: set[str]) -> set[str]:
        return listed


def writer(tmp_path: Path, follow: Follow | None) -> tuple[DeviceInfoWriter, Counted]:
    store = follow.store if follow is not None else Counted(tmp_path)
    policy = Policy(default_fault_code_table(), default_fault_customization(), default_switch_fault_table())
    published = Published(VerdictBoard(), NodeState(policy))
    w = DeviceInfoWriter(store, published, Edits(), ManualClock(), "node-a", None, follow=follow)
    return w, store


async def test_a_watched_configmap_is_not_read(tmp_path: Path) -> None:
    follow = Follow(Counted(tmp_path))
    w, store = writer(tmp_path, follow)
    assert await w.sync() and (store.gets, store.puts) == (0, 1)  # the watch said: none yet; created
    assert not await w.sync() and (store.gets, store.puts) == (0, 1)  # our write, before its echo
    follow.echo()
    assert not await w.sync() and (store.gets, store.puts) == (0, 1)  # the echo: the same content


async def test_a_conflict_reads_the_server_once(tmp_path: Path) -> None:
    follow = Follow(Counted(tmp_path))
    w, store = writer(tmp_path, follow)
    store.conflicts = 1
    assert await w.sync()
    assert (store.gets, store.puts) == (1, 2)


async def test_without_a_listed_watch_every_sync_reads(tmp_path: Path) -> None:
    for follow in (None, Follow(Counted(tmp_path), synced=False)):
        w, store = writer(tmp_path, follow)
        await w.sync()
        await w.sync()
        assert store.gets == 2


@pytest.mark.parametrize(
    ("follow", "failed", "expected"),
    [
        (None, False, POLL_S),  # offline: the old pace
        (False, False, POLL_S),  # a watch that has not listed
        (True, True, POLL_S),  # after a failed sync
        (True, False, 300.0),  # at rest: until the refresh rewrite
    ],
)
def test_idle_wait(tmp_path: Path, follow: bool | None, failed: bool, expected: float) -> None:
    w, _ = writer(tmp_path, None if follow is None else Follow(Counted(tmp_path), synced=follow))
    w._last_write = time.monotonic()
    w._failed = failed
    assert w.idle_wait() == pytest.approx(expected, abs=1.0)


@pytest.mark.parametrize(
    ("since", "interval", "woken", "expected"),
    [
        (10.0, 1.0, True, 0.1),  # a change after a quiet spell: waits for the rest of its burst
        (0.3, 1.0, True, 0.7),  # within the write interval: the interval's rest, which covers the settle
        (0.95, 1.0, True, 0.1),  # the interval nearly over: the settle is longer
        (10.0, 1.0, False, 0.0),  # the refresh (nothing woke it): at once
        (0.5, 1.0, False, 0.5),
        (10.0, 0.02, True, 0.02),  # the settle never longer than the write interval
    ],
)
def test_sync_wait(since: float, interval: float, woken: bool, expected: float) -> None:
    assert sync_wait(since, interval, woken=woken) == pytest.approx(expected)
