"""Soft share's switch and device ids (issue 23), and the share count by chip family.

Table tests of the pure rules (softshare/switch.py, resources/devices.py), then the settings' start
checks (a bad set exits 2 through `prepare`) and the resource manager's published lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import grpc
import pytest
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.adapters.settings import load_settings
from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.faults import default_fault_code_table
from ascend_common.schemas.exporter import Chip
from ascend_device_plugin import cli
from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocation.report import HostFacts
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.kubelet.server import status_of
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.resources.devices import physical_devices
from ascend_device_plugin.resources.manager import ResourceManager
from ascend_device_plugin.settings import PluginSettings
from ascend_device_plugin.softshare.switch import (
    check_switch,
    ids_per_chip,
    ignored_share_count,
    soft_share_on,
    soft_share_refusal,
)
from pydantic import ValidationError

from tests.support.allocator import wired_allocator
from tests.support.chips import exporter_chip, node_910b, node_950
from tests.support.pod_source import FakePods


def chip(phy: int, numa: int) -> ChipInfo:
    return ChipInfo(
        logic_id=phy, phy_id=phy, card_id=phy, name=f"Ascend910-{phy}", rtype=ResourceType.ASCEND910,
        family=F.ASCEND910B, aicore=20, healthy=True, numa_node=numa,
    )  # fmt: skip


F = ChipFamily
DIR = Path("/var/lib/ss")


# ---- the switch and the ids per chip --------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "directory", "on"),
    [(100, DIR, True), (100, None, False), (99, DIR, False), (1, DIR, False), (1, None, False)],
)
def test_soft_share_is_on_iff_count_100_and_a_dir(count: int, directory: Path | None, on: bool) -> None:
    assert soft_share_on(count, directory) is on


@pytest.mark.parametrize(
    ("family", "count", "soft", "ids"),
    [
        (F.ASCEND910B, 4, False, 1),  # common.ShareDev: only the 310P/310B are copied
        (F.ASCEND910A3, 4, False, 1),
        (F.ASCEND950, 4, False, 1),
        (F.ASCEND910, 4, False, 1),
        (F.ASCEND310, 4, False, 1),
        (F.ASCEND310P, 4, False, 4),
        (F.ASCEND310B, 4, False, 4),
        (F.ASCEND910B, 100, False, 1),  # count 100 without the dir: one id per chip
        (F.ASCEND910B, 100, True, 100),
        (F.ASCEND910A3, 100, True, 100),
        (F.ASCEND950, 100, True, 100),
        (F.ASCEND910B, 1, False, 1),
        (F.ASCEND310P, 1, False, 1),
    ],
)
def test_ids_per_chip_by_family(family: ChipFamily, count: int, soft: bool, ids: int) -> None:
    assert ids_per_chip(family, count, soft) == ids


def test_an_ignored_share_count_is_warned_about_once_per_family() -> None:
    warning = ignored_share_count([F.ASCEND910B, F.ASCEND910B], 4, soft_share=False)
    assert warning is not None
    assert "--share-dev-count 4" in warning
    assert "Ascend910B chips are advertised once each" in warning
    assert ignored_share_count([F.ASCEND310P], 4, soft_share=False) is None
    assert ignored_share_count([F.ASCEND910B], 1, soft_share=False) is None
    assert ignored_share_count([F.ASCEND910B], 100, soft_share=True) is None


@pytest.mark.parametrize("family", [F.ASCEND310P, F.ASCEND310B])
def test_soft_share_is_refused_on_the_310p_and_310b(family: ChipFamily) -> None:
    reason = soft_share_refusal([F.ASCEND910B, family], soft_share=True)
    assert reason == f"soft share (--soft-share-dev-config-dir) is not supported on {family.value} chips"
    assert soft_share_refusal([family], soft_share=False) is None


@pytest.mark.parametrize("family", [F.ASCEND910B, F.ASCEND910A3, F.ASCEND950])
def test_soft_share_is_accepted_on_the_910b_a3_and_950(family: ChipFamily) -> None:
    assert soft_share_refusal([family], soft_share=True) is None


@pytest.mark.parametrize(
    ("count", "directory", "volcano", "preset", "reason"),
    [
        (100, DIR, True, True, None),
        (1, None, False, True, None),
        (100, None, False, True, None),  # no dir: no soft share, nothing to check
        (50, DIR, True, True, "--share-dev-count must be 100 when --soft-share-dev-config-dir is set"),
        (100, Path("ss"), True, True, "--soft-share-dev-config-dir 'ss' is not an absolute path"),
        (100, DIR, False, True, "soft share (--soft-share-dev-config-dir) needs --volcano-type"),
        (2, None, True, False, "--preset-virtual-device false needs --share-dev-count 1"),
        (100, DIR, True, False, "--preset-virtual-device false needs --share-dev-count 1"),
    ],
)
def test_check_switch(count: int, directory: Path | None, volcano: bool, preset: bool, reason: str | None) -> None:
    assert check_switch(count, directory, volcano_type=volcano, preset_virtual_device=preset) == reason


# ---- the settings: a bad set exits 2 --------------------------------------------------------------


def settings(*argv: str) -> PluginSettings:
    return load_settings(PluginSettings, list(argv), prog="ascend-device-plugin")


def test_settings_soft_share_serves(tmp_path: Path) -> None:
    s = settings("--share-dev-count", "100", "--soft-share-dev-config-dir", str(tmp_path / "ss"), "--volcano-type")
    assert s.soft_share
    assert s.soft_share_dev_config_dir == tmp_path / "ss"
    assert not settings("--share-dev-count", "100").soft_share


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--share-dev-count", "50", "--soft-share-dev-config-dir", "{tmp}/ss", "--volcano-type"], "must be 100"),
        (["--share-dev-count", "100", "--soft-share-dev-config-dir", "ss", "--volcano-type"], "not an absolute path"),
        (
            ["--share-dev-count", "100", "--soft-share-dev-config-dir", "{tmp}/nope/ss", "--volcano-type"],
            "its parent is not a directory",
        ),
        (["--share-dev-count", "100", "--soft-share-dev-config-dir", "{tmp}/ss"], "needs --volcano-type"),
        (["--share-dev-count", "2", "--preset-virtual-device", "false", "--volcano-type"], "needs --share-dev-count 1"),
    ],
)
def test_settings_refuse_a_bad_share_set_and_the_cli_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(ValidationError, match=reason.replace("-", r"\-").replace(".", r"\.")):
        settings(*args)
    assert cli.main(["--kube", "offline", *args]) == 2
    err = capsys.readouterr().err
    assert "ascend-device-plugin: invalid settings" in err
    assert reason in err


# ---- the resource manager: what each resource advertises --------------------------------------------


def published(*, share_count: int, soft_share: bool, chips: Mapping[int, Chip]) -> dict[str, bool]:
    board = ViewBoard()
    manager = ResourceManager(
        board, default_fault_code_table(), PluginMetrics(), share_count=share_count, soft_share=soft_share
    )
    manager.set_chips(chips)
    (resource,) = board.resources()
    view = board.get(resource)
    assert view is not None
    return {d.id: d.healthy for d in view.devices}


def test_share_count_4_on_the_910b_gives_one_id_per_chip_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    devices = published(share_count=4, soft_share=False, chips=node_910b())
    assert sorted(devices) == sorted(f"Ascend910-{p}" for p in range(8))
    assert [r.getMessage() for r in caplog.records].count("share count ignored") == 1


def test_share_count_4_on_the_310p_gives_4_ids_per_chip() -> None:
    chips = {i: exporter_chip(i, i, name="310P3", board=0x64, aicore=8, product="Atlas 300I Pro") for i in range(2)}
    devices = published(share_count=4, soft_share=False, chips=chips)
    assert sorted(devices) == sorted(f"Ascend310P-{p}-{i}" for p in range(2) for i in range(4))


def test_count_100_without_a_dir_gives_one_id_per_910b_chip() -> None:
    assert len(published(share_count=100, soft_share=False, chips=node_910b())) == 8


def test_soft_share_two_chips_give_200_ids_and_a_broken_chip_exactly_its_100() -> None:
    chips = {0: exporter_chip(0, 0), 1: exporter_chip(1, 1, healthy=False, codes=["8C1FA006"])}
    devices = published(share_count=100, soft_share=True, chips=chips)
    assert sorted(devices) == sorted(f"Ascend910-{p}-{i}" for p in range(2) for i in range(100))
    assert {d for d, ok in devices.items() if not ok} == {f"Ascend910-1-{i}" for i in range(100)}


def test_soft_share_on_the_950_names_ids_npu_phy_index() -> None:
    devices = published(share_count=100, soft_share=True, chips=node_950(2))
    assert "npu-0-0" in devices
    assert sorted(devices) == sorted(f"npu-{p}-{i}" for p in range(2) for i in range(100))


def test_soft_share_ids_keep_the_chips_numa_node() -> None:
    chips = [chip(0, 0), chip(1, 1)]
    devices = physical_devices(chips, ResourceType.ASCEND910, share_count=100, soft_share=True)
    assert {d.numa for d in devices if d.id.startswith("Ascend910-1-")} == {1}
    assert {d.numa for d in devices if d.id.startswith("Ascend910-0-")} == {0}


def test_soft_share_refusal_is_reported_by_the_manager_for_310p_chips() -> None:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=100, soft_share=True)
    manager.set_chips({0: exporter_chip(0, 0, name="310P3", board=0x64, aicore=8, product="Atlas 300I Pro")})
    assert (
        manager.soft_share_refusal() == "soft share (--soft-share-dev-config-dir) is not supported on Ascend310P chips"
    )


# ---- Allocate of soft-share ids: the soft-share path, whatever the count ------------------------------


@pytest.mark.parametrize("volcano", [True, False])
async def test_allocate_of_soft_share_ids_without_a_quota_pod_is_refused_with_failed_precondition(
    volcano: bool,
) -> None:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), share_count=100, soft_share=True)
    manager.set_chips(node_910b())
    alloc = wired_allocator(manager, board, FakePods(), HostFacts, volcano=volcano, soft_share=True)
    ids = [f"Ascend910-1-{i}" for i in range(30)]
    with pytest.raises(AllocationError) as err:
        await alloc.allocate("Ascend910", _request(ids))
    assert err.value.kind is Refusal.NO_POD
    assert status_of(err.value) is grpc.StatusCode.FAILED_PRECONDITION
    assert "no active soft-share pod annotated by Volcano with an AI-core quota of 30" in err.value.message
    # Eight ids on an eight-chip node are not the whole node under soft share: the soft-share path still.
    with pytest.raises(AllocationError, match="AI-core quota of 8"):
        await alloc.allocate("Ascend910", _request([f"Ascend910-0-{i}" for i in range(8)]))
    await alloc.stop()


def _request(ids: list[str]) -> pb.AllocateRequest:
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])
