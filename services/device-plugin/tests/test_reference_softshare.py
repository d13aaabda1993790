"""Ports of the reference's Go tests of soft share's device ids (pkg/server/plugin_test.go:
TestAddSoftShareDev, TestGenerateAllDeviceMap's soft-share cases).

The reference builds the ListAndWatch answer in `responseToKubelet`: under soft share each real
chip becomes ShareCount ids (`addSoftShareDev`) and the Volcano map is real -> real
(`generateAllDeviceMap`), so an id always reports its own chip. Ours: resources.devices.physical_devices
makes the ids and the resource manager skips the Volcano health remap under soft share; these
tests go through the manager, as the kubelet sees its lists. Test names are the Go test's, then
the case.
"""

from __future__ import annotations

import pytest
from ascend_common.faults import default_fault_code_table
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.resources.manager import ResourceManager

from tests.support.chips import exporter_chip

NPU = "Ascend910"


def manager(chips: int, *, broken: frozenset[int] = frozenset()) -> tuple[ResourceManager, ViewBoard]:
    board = ViewBoard()
    m = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=100, soft_share=True)
    m.set_chips(
        {
            p: exporter_chip(p, p, healthy=p not in broken, codes=["8C1FA006"] if p in broken else None)
            for p in range(chips)
        }
    )
    return m, board


def devices(board: ViewBoard) -> dict[str, bool]:
    view = board.get(NPU)
    assert view is not None
    return {d.id: d.healthy for d in view.devices}


def test_add_soft_share_dev() -> None:
    # Go: ShareCount 10 gives 10 ids for one device; ours: soft share is count 100 only, so 100,
    # each with the device's health.
    _, board = manager(1)
    got = devices(board)
    assert len(got) == 100
    assert sorted(got) == sorted(f"{NPU}-0-{i}" for i in range(100))
    assert all(got.values())


@pytest.mark.parametrize(
    "klt2real",
    [
        # soft-share: many-to-one mapping, vol2kltMap uses real device name as value
        {f"{NPU}-0-0": f"{NPU}-0", f"{NPU}-0-1": f"{NPU}-0", f"{NPU}-0-2": f"{NPU}-0", f"{NPU}-1-0": f"{NPU}-1",
         f"{NPU}-1-1": f"{NPU}-1"},
        # soft-share: partial physical devices have virtual device mappings
        {f"{NPU}-0-0": f"{NPU}-0", f"{NPU}-0-5": f"{NPU}-0", f"{NPU}-1-3": f"{NPU}-1"},
        # soft-share: no devices allocated, all paired by index
        {},
        # ours: a kubelet id mapped to another chip still reports its own chip (the map is real -> real)
        {f"{NPU}-0-7": f"{NPU}-2", f"{NPU}-2-7": f"{NPU}-0"},
    ],
)  # fmt: skip
def test_generate_all_device_map_soft_share(klt2real: dict[str, str]) -> None:
    m, board = manager(3, broken=frozenset({2}))
    m.volcano_allocated("pod-uid", klt2real)
    got = devices(board)
    assert len(got) == 300
    assert {d for d, ok in got.items() if not ok} == {f"{NPU}-2-{i}" for i in range(100)}
