"""The device-plugin's allocator wired as app.py wires it, over one pod source that is also the patcher."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ascend_common.adapters.clients.exporter import ExporterClient
from ascend_device_plugin.allocation.chip_owners import ChipOwners, ChipTaken
from ascend_device_plugin.allocation.containers import Containers
from ascend_device_plugin.allocation.plain import PlainReport
from ascend_device_plugin.allocation.refusals import AllocationError, Refusal
from ascend_device_plugin.allocation.report import HostFacts, Report
from ascend_device_plugin.allocator import Allocator
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.resources.manager import ResourceManager
from ascend_device_plugin.softshare.dirs import SoftShareDirs
from ascend_device_plugin.softshare.files import HostFiles
from ascend_device_plugin.softshare.softshare_path import SoftSharePath
from ascend_device_plugin.vnpu.dynamic import DynamicVnpu
from ascend_device_plugin.volcano.pods import VolcanoPods
from ascend_device_plugin.volcano.volcano_path import VolcanoPath

from tests.support.pod_source import FakePods


def wired_allocator(
    manager: ResourceManager,
    board: ViewBoard,
    pods: FakePods,
    node: Callable[[], HostFacts],
    *,
    runtime_mode: bool = True,
    volcano: bool = False,
    exporter: ExporterClient | None = None,
    dev_root: Path = Path("/"),
    preset_vnpu: bool = True,
    taken_tries: int = 3,
    taken_wait_s: float = 0.2,
    soft_share: bool = False,
    npu_info_dir: Path = Path("/nonexistent/enpu"),
    soft_share_dir: Path = Path("/nonexistent/ss"),
) -> Allocator:
    containers = Containers(manager, runtime_mode=runtime_mode, dev_root=dev_root)
    report = Report(manager, patcher=pods, node=node)
    cache = VolcanoPods(pods)
    path = VolcanoPath(board, containers, cache, report, taken_tries=taken_tries, taken_wait_s=taken_wait_s)
    # Soft share writes under `npu_info_dir` and `soft_share_dir` (tests give tmp dirs).
    dirs = SoftShareDirs(HostFiles(npu_info_dir, soft_share_dir), pods=pods.pods)
    shared = SoftSharePath(containers, cache, report, path, dirs, soft_share_dir) if soft_share else None
    return Allocator(
        board, containers, report, PlainReport(report, pods=pods), cache,
        DynamicVnpu(containers, cache, report, exporter=exporter), volcano=path if volcano else None,
        preset_vnpu=preset_vnpu, soft_share=shared,
    )  # fmt: skip


def held_by(owners: ChipOwners) -> Callable[[list[str]], None]:
    """The hold app.py wires under `--kubelet-api both`: the chip table, its refusal as FAILED_PRECONDITION."""

    def hold(chips: list[str]) -> None:
        try:
            owners.allocate(chips, 0.0)
        except ChipTaken as exc:
            raise AllocationError(Refusal.DRA_CLAIM, str(exc)) from None

    return hold
