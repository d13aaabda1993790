"""The Allocate and GetPreferredAllocation paths, in process (no gRPC, no cluster)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from ascend_common.adapters.clients.exporter import ExporterClient
from ascend_common.adapters.kubelet import deviceplugin_pb2 as pb
from ascend_common.faults import default_fault_code_table
from ascend_common.schemas.exporter import Chip, ChipState, Vnpu
from ascend_device_plugin.allocation.annotations import TAKEN
from ascend_device_plugin.allocation.chip_owners import ChipOwners
from ascend_device_plugin.allocation.refusals import AllocationError
from ascend_device_plugin.allocation.report import HostFacts
from ascend_device_plugin.allocator import Allocator
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.kubelet.server import status_of
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.resources.manager import ResourceManager

from tests.support.allocator import held_by, wired_allocator
from tests.support.chips import exporter_chip, node_910a, node_910b
from tests.support.pod_source import FakePods

NPU_CORE_RESOURCE = "huawei.com/npu-core"


def setup(
    chips: Mapping[int, Chip],
    pods: FakePods | None = None,
    node: Callable[[], HostFacts] = lambda: HostFacts(host_ip="10.0.0.5"),
    **kw: Any,
) -> tuple[Allocator, ResourceManager, FakePods]:
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics())
    manager.set_chips(chips)
    pods = FakePods() if pods is None else pods
    allocator = wired_allocator(manager, board, pods, node, **kw)
    return allocator, manager, pods


def request(*containers: list[str]) -> pb.AllocateRequest:
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=c) for c in containers])


async def test_plain_path_uses_phy_ids_and_answers_each_container_in_order() -> None:
    allocator, _, _ = setup(node_910b())
    resp = await allocator.allocate("Ascend910", request(["Ascend910-3", "Ascend910-1"], ["Ascend910-6"]))
    assert [dict(r.envs) for r in resp.container_responses] == [
        {"ASCEND_VISIBLE_DEVICES": "3,1", "ASCEND_RUNTIME_OPTIONS": ""},  # the kubelet's order (GetDeviceListID)
        {"ASCEND_VISIBLE_DEVICES": "6", "ASCEND_RUNTIME_OPTIONS": ""},
    ]
    assert all(not r.devices for r in resp.container_responses)


async def test_direct_mount_mode_gives_davinci_nodes(tmp_path: object) -> None:
    allocator, _, _ = setup(node_910b(), runtime_mode=False)
    resp = await allocator.allocate("Ascend910", request(["Ascend910-5"]))
    [c] = resp.container_responses
    assert [(d.container_path, d.host_path, d.permissions) for d in c.devices] == [
        ("/dev/davinci5", "/dev/davinci5", "rw")
    ]
    assert not c.envs


@pytest.mark.parametrize(
    ("containers", "message"),
    [
        ([["Ascend910-9"]], "unknown device 'Ascend910-9'"),
        ([["Ascend910-1", "Ascend910-1"]], "requested twice"),
        ([[]], "names no device"),
        ([["x" * 60]], "longer than 50"),
        ([], "no container"),
    ],
)
async def test_bad_requests_are_invalid_argument(containers: list[list[str]], message: str) -> None:
    allocator, _, pods = setup(node_910b())
    with pytest.raises(AllocationError) as err:
        await allocator.allocate("Ascend910", request(*containers))
    assert status_of(err.value) is grpc.StatusCode.INVALID_ARGUMENT
    assert message in err.value.message
    assert pods.patches == []


def pending(name: str, devices: str, predicate: str, uid: str | None = None, count: int = 2) -> PodView:
    return PodView(
        namespace="ml", name=name, uid=uid or f"uid-{name}", phase="Pending",
        annotations={"huawei.com/Ascend910": devices, "predicate-time": predicate},
        requests={"huawei.com/Ascend910": count}, created=1.0,
    )  # fmt: skip


async def test_volcano_serves_the_oldest_pod_with_its_devices_and_marks_it_taken() -> None:
    allocator, manager, pods = setup(node_910b(), volcano=True)
    pods.items = [
        pending("younger", "Ascend910-0,Ascend910-1", "2000"),
        pending("older", "Ascend910-6,Ascend910-7", "1000"),
        pending("broken", "Ascend910-0,,", "10"),
    ]
    resp = await allocator.allocate("Ascend910", request(["Ascend910-2", "Ascend910-3"]))
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "6,7"
    # Marked taken inside the call, before the answer; the allocation report follows.
    assert pods.patches[0] == ("ml", "older", {"predicate-time": TAKEN})
    await allocator.stop()  # flushes the patch written after the answer
    [_, (ns, name, patch)] = pods.patches
    assert (ns, name) == ("ml", "older")
    assert "predicate-time" not in patch
    assert patch["huawei.com/AscendReal"] == "Ascend910-6,Ascend910-7"
    assert patch["huawei.com/kltDev"] == "Ascend910-2,Ascend910-3"
    config = json.loads(patch["ascend.kubectl.kubernetes.io/ascend-910-configuration"])
    assert config["server_id"] == "uid-older" and config["pod_name"] == "older" and config["host_ip"] == "10.0.0.5"
    assert [d["device_id"] for d in config["devices"]] == ["6", "7"]
    assert config["devices"][0]["device_ip"] == "192.168.100.7"
    # The kubelet's ids now report the health of the real devices behind them.
    assert manager.inventory.volcano_map == {"Ascend910-2": "Ascend910-6", "Ascend910-3": "Ascend910-7"}
    # A pod that finished takes its mapping with it.
    manager.set_pods([p for p in pods.items if p.name != "older"])
    assert manager.inventory.volcano_map == {}
    # The next Allocate serves the other pod, even before the cache sees the patch.
    resp = await allocator.allocate("Ascend910", request(["Ascend910-4", "Ascend910-5"]))
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "0,1"
    await allocator.stop()
    assert pods.patches[-1][1] == "younger"
    # Nothing left: a clear error, no patch.
    with pytest.raises(AllocationError, match="no active pod annotated by Volcano") as err:
        await allocator.allocate("Ascend910", request(["Ascend910-0", "Ascend910-1"]))
    assert "malformed" in err.value.message
    assert len(pods.patches) == 4  # taken + report, twice
    assert pods.refreshes == 1, "a miss re-lists the cache once, then answers"


async def test_volcano_device_health_follows_the_real_device() -> None:
    chips = node_910b()
    allocator, manager, pods = setup(chips, volcano=True)
    pods.items = [pending("p", "Ascend910-6", "5", count=1)]
    await allocator.allocate("Ascend910", request(["Ascend910-2"]))
    logic_of_phy6 = next(c.logic_id for c in chips.values() if c.phy_id == 6)
    manager.set_chips({logic_of_phy6: chips[logic_of_phy6].model_copy(update={"state": ChipState.CARD_DROP})})
    view = allocator.board.get("Ascend910")
    assert view is not None
    health = {d.id: d.healthy for d in view.devices}
    assert health["Ascend910-2"] is False, "kubelet id 2 stands for real device 6"


async def test_volcano_allocation_publishes_the_real_devices_health_at_once() -> None:
    """The real device was unhealthy already (Volcano chose it before it saw the fault): the kubelet's id
    reports it from the Allocate on, with no other input to the resource manager."""
    chips = node_910b()
    allocator, manager, pods = setup(chips, volcano=True)
    logic_of_phy6 = next(c.logic_id for c in chips.values() if c.phy_id == 6)
    manager.set_chips({logic_of_phy6: chips[logic_of_phy6].model_copy(update={"state": ChipState.CARD_DROP})})
    view = allocator.board.get("Ascend910")
    assert view is not None and {d.id for d in view.devices if not d.healthy} == {"Ascend910-6"}
    pods.items = [pending("p", "Ascend910-6", "5", count=1)]
    await allocator.allocate("Ascend910", request(["Ascend910-2"]))
    view = allocator.board.get("Ascend910")
    assert view is not None
    assert {d.id for d in view.devices if not d.healthy} == {"Ascend910-2", "Ascend910-6"}


def preferred(available: list[str], must: list[str], size: int) -> pb.PreferredAllocationRequest:
    return pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
            )
        ]
    )


@pytest.mark.parametrize(
    ("must", "size", "expect"),
    [
        ([], 4, [["Ascend910-4", "Ascend910-5", "Ascend910-6", "Ascend910-7"]]),
        (["Ascend910-2"], 2, [["Ascend910-0", "Ascend910-2"], ["Ascend910-2", "Ascend910-3"]]),
        ([], 1, [["Ascend910-0"], ["Ascend910-2"], ["Ascend910-3"]]),
    ],
)
def test_preferred_allocation_on_910a_rings(must: list[str], size: int, expect: list[list[str]]) -> None:
    allocator, _, _ = setup(node_910a())
    available = [f"Ascend910-{i}" for i in range(8) if i != 1]
    [resp] = allocator.preferred("Ascend910", preferred(available, must, size)).container_responses
    assert list(resp.deviceIDs) in expect
    assert allocator.preferred_available("Ascend910")


def test_preferred_allocation_bad_request_is_invalid_argument() -> None:
    allocator, _, _ = setup(node_910a())
    with pytest.raises(AllocationError) as err:
        allocator.preferred("Ascend910", preferred(["Ascend910-0"], ["Ascend910-5"], 1))
    assert status_of(err.value) is grpc.StatusCode.INVALID_ARGUMENT


@dataclass
class RefusingPods(FakePods):
    """The API server refuses the taken patch (`fail` times: every try, or the first ones)."""

    fail: int = 10**6
    tries: list[tuple[int, float]] = field(default_factory=list)

    async def patch_pod(
        self, namespace: str, name: str, annotations: dict[str, str], *, retries: int = 3, base_delay: float = 0.2
    ) -> None:
        self.tries.append((retries, base_delay))
        if "predicate-time" in annotations and self.fail > 0:
            self.fail -= 1
            raise RuntimeError("patch pod ml/x annotations: 403 forbidden")
        await super().patch_pod(namespace, name, annotations)


async def test_volcano_allocate_fails_and_hands_out_nothing_when_the_pod_cannot_be_marked_taken() -> None:
    """TestAllocateWithVolcano2 'TryUpdatePodAnnotation failed': an error, no mapping, no report; the pod
    is not held, so the next Allocate (once the API server answers) serves it."""
    board_chips = node_910b()
    pods = RefusingPods(fail=1)
    allocator, manager, _ = setup(board_chips, pods, volcano=True, taken_tries=3, taken_wait_s=0.05)
    pods.items = [pending("x", "Ascend910-6,Ascend910-7", "1000")]
    with pytest.raises(AllocationError, match="cannot mark its Volcano allocation taken") as err:
        await allocator.allocate("Ascend910", request(["Ascend910-2", "Ascend910-3"]))
    assert status_of(err.value) is grpc.StatusCode.UNAVAILABLE and "ml/x" in err.value.message
    assert pods.tries == [(2, 0.05)], "the reference's tries and wait, through the patcher's retries"
    assert pods.patches == [] and manager.inventory.volcano_map == {}
    resp = await allocator.allocate("Ascend910", request(["Ascend910-2", "Ascend910-3"]))
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "6,7"
    await allocator.stop()


async def test_under_preset_vnpu_a_request_for_every_chip_takes_the_kubelets_ids() -> None:
    """Allocate: len(request) == len(AllDevs) with preset vNPU skips the Volcano path."""
    allocator, _, pods = setup(node_910b(), volcano=True)
    every = [f"Ascend910-{n}" for n in range(8)]
    pods.items = [pending("all", ",".join(reversed(every)), "5", count=8)]
    resp = await allocator.allocate("Ascend910", request(every))
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == ",".join(str(n) for n in range(8))
    await allocator.stop()
    assert all("predicate-time" not in patch for _, _, patch in pods.patches)


# --- Ported: TestAllocateWithVolcano1/2/3 (pkg/server/plugin_test.go), one request of one chip ---------


def volcano_pod(annotations: dict[str, str], count: int = 1) -> PodView:
    return PodView(namespace="ml", name="test", uid="uid-test", phase="Pending", annotations=annotations,
                   requests={"huawei.com/Ascend910": count}, created=1.0)  # fmt: skip


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param([], id="GetPodList failed"),  # no pod at all (the cache and the re-list are empty)
        pytest.param(
            [volcano_pod({"huawei.com/Ascend910": "Ascend910-1,Ascend910-2", "predicate-time": "5"})],
            id="oldestPod is nil",
        ),  # no pod passes the filter
    ],
)
async def test_AllocateWithVolcano1(pods: list[PodView]) -> None:
    allocator, manager, fake = setup(node_910b(), volcano=True)
    fake.items = pods
    with pytest.raises(AllocationError) as err:
        await allocator.allocate("Ascend910", request(["Ascend910-0"]))
    assert status_of(err.value) is grpc.StatusCode.FAILED_PRECONDITION
    assert fake.patches == [] and manager.inventory.volcano_map == {}
    assert fake.refreshes == 1, "the cache was re-read once before giving up"


async def test_AllocateWithVolcano2_TryUpdatePodAnnotation_failed() -> None:
    pods = RefusingPods()
    allocator, manager, _ = setup(node_910b(), pods, volcano=True)
    pods.items = [volcano_pod({"huawei.com/Ascend910": "Ascend910-0", "predicate-time": "5"})]
    with pytest.raises(AllocationError) as err:
        await allocator.allocate("Ascend910", request(["Ascend910-0"]))
    assert status_of(err.value) is grpc.StatusCode.UNAVAILABLE
    assert pods.patches == [] and manager.inventory.volcano_map == {}


@pytest.mark.parametrize(
    "annotations",
    [
        # TestAllocateWithVolcano2 'common.GetDeviceFromPodAnnotation failed': a vNPU name where chips belong.
        pytest.param(
            {"huawei.com/Ascend910": "Ascend910-2c-180-3", "predicate-time": "5"},
            id="GetDeviceFromPodAnnotation failed",
        ),
        # TestAllocateWithVolcano3 'with volcano GetDeviceListID failed': a name without an id.
        pytest.param({"huawei.com/Ascend910": "Ascend910", "predicate-time": "5"}, id="GetDeviceListID failed"),
    ],
)
async def test_AllocateWithVolcano_malformed_annotation(annotations: dict[str, str]) -> None:
    allocator, manager, fake = setup(node_910b(), volcano=True)
    fake.items = [volcano_pod(annotations)]
    with pytest.raises(AllocationError, match="malformed"):
        await allocator.allocate("Ascend910", request(["Ascend910-0"]))
    assert fake.patches == [] and manager.inventory.volcano_map == {}


async def test_AllocateWithVolcano3_with_volcano_run_ok() -> None:
    """The kubelet's Ascend910-0 stands for the annotated Ascend910-1; Ascend910-2 stands for nothing."""
    allocator, manager, fake = setup(node_910b(), volcano=True)
    fake.items = [volcano_pod({"huawei.com/Ascend910": "Ascend910-1", "predicate-time": "5"})]
    resp = await allocator.allocate("Ascend910", request(["Ascend910-0"]))
    assert len(resp.container_responses) == 1
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "1"
    assert manager.inventory.volcano_map == {"Ascend910-0": "Ascend910-1"}
    assert "Ascend910-2" not in manager.inventory.volcano_map
    await allocator.stop()


async def test_volcano_allocation_report_is_built_after_the_answer(caplog: pytest.LogCaptureFixture) -> None:
    """Inside the call only the pod is marked taken; its log line and report come once the kubelet has
    its answer (the Allocate handler has returned), then stop() flushes them."""
    allocator, _, pods = setup(node_910b(), volcano=True)
    pods.items = [pending("p", "Ascend910-6,Ascend910-7", "5")]
    with caplog.at_level(logging.INFO):
        await allocator.allocate("Ascend910", request(["Ascend910-2", "Ascend910-3"]))
        assert pods.patches == [("ml", "p", {"predicate-time": TAKEN})]
        assert "allocated by Volcano" not in caplog.messages
        await allocator.stop()
    assert "allocated by Volcano" in caplog.messages
    assert [p[2].get("huawei.com/AscendReal") for p in pods.patches] == [None, "Ascend910-6,Ascend910-7"]


async def test_a_report_that_cannot_be_built_is_logged_and_the_pod_still_marked_taken(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken_node() -> HostFacts:
        raise RuntimeError("node facts unreadable")

    allocator, _, pods = setup(node_910b(), node=broken_node, volcano=True)
    pods.items = [pending("p", "Ascend910-6,Ascend910-7", "5")]
    resp = await allocator.allocate("Ascend910", request(["Ascend910-2", "Ascend910-3"]))
    assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "6,7"
    await allocator.stop()
    assert pods.patches == [("ml", "p", {"predicate-time": TAKEN})] * 2
    [record] = [r for r in caplog.records if r.getMessage() == "allocation report not built"]
    assert record.exc_info is not None and "node facts unreadable" in str(record.exc_info[1])


async def test_with_both_apis_the_chips_are_taken_from_the_chip_table_before_the_answer() -> None:
    # `--kubelet-api both`: Allocate takes the chips, or is refused with FAILED_PRECONDITION when a
    # claim holds one, and then answers nothing.
    owners = ChipOwners()
    owners.reserve("claim-uid", ["Ascend910-2"], 0.0)
    allocator, _, _ = setup(node_910b())
    allocator.containers.hold = held_by(owners)
    resp = await allocator.allocate("Ascend910", request(["Ascend910-3"], ["Ascend910-1"]))
    assert len(resp.container_responses) == 2
    assert owners.device_plugin(0.0) == {"Ascend910-1", "Ascend910-3"}  # taken before the answer
    with pytest.raises(AllocationError) as err:
        await allocator.allocate("Ascend910", request(["Ascend910-4", "Ascend910-2"]))
    assert status_of(err.value) == grpc.StatusCode.FAILED_PRECONDITION
    assert err.value.message == "Ascend910-2 held by claim uid claim-uid"
    assert "Ascend910-4" not in owners.device_plugin(0.0)  # the refused request took nothing


async def test_with_both_apis_the_volcano_path_takes_the_real_chips_not_the_kubelets_ids() -> None:
    """Volcano's annotation names the chips the pod gets: those leave the DRA side (and a claim on one
    refuses the Allocate before the pod is marked taken); the kubelet's ids are only placeholders."""
    owners = ChipOwners()
    owners.reserve("claim-uid", ["Ascend910-7"], 0.0)
    allocator, _, pods = setup(node_910b(), volcano=True)
    allocator.containers.hold = held_by(owners)
    pods.items = [pending("claimed", "Ascend910-6,Ascend910-7", "1000")]
    with pytest.raises(AllocationError) as err:
        await allocator.allocate("Ascend910", request(["Ascend910-2", "Ascend910-3"]))
    assert status_of(err.value) == grpc.StatusCode.FAILED_PRECONDITION
    assert err.value.message == "Ascend910-7 held by claim uid claim-uid"
    assert pods.patches == [] and owners.device_plugin(0.0) == frozenset()

    pods.items = [pending("free", "Ascend910-4,Ascend910-5", "1000")]
    await allocator.allocate("Ascend910", request(["Ascend910-2", "Ascend910-3"]))
    assert owners.device_plugin(0.0) == {"Ascend910-4", "Ascend910-5"}
    await allocator.stop()


class CreatingExporter(ExporterClient):
    """Creates every vNPU asked for (vdev 100 + the count so far) and records the asks; nothing on a socket."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent/exporter.sock"))
        self.created: list[tuple[int, str]] = []

    async def create_vnpu(self, logic_id: int, template: str, vdev_id: int | None = None) -> Vnpu:
        self.created.append((logic_id, template))
        return Vnpu(vdev_id=100 + len(self.created), vfg_id=0, template=template, suffix="5c.1cpu.16g", aicore=5)


async def test_with_both_apis_a_dynamic_vnpu_takes_its_whole_chip_before_it_is_created() -> None:
    """A vNPU carved from a chip leaves no whole chip for a claim; one a claim holds refuses the
    Allocate before the exporter is asked for anything, and the pod stays servable."""
    owners = ChipOwners()
    owners.reserve("claim-uid", ["Ascend910-2"], 0.0)
    exporter = CreatingExporter()
    board = ViewBoard()
    manager = ResourceManager(board, default_fault_code_table(), PluginMetrics(), preset_virtual_device=False)
    manager.set_chips({p: exporter_chip(p, p) for p in range(8)})
    pods = FakePods()
    facts = HostFacts(host_ip="10.0.0.5")
    allocator = wired_allocator(manager, board, pods, lambda: facts, exporter=exporter, preset_vnpu=False)
    allocator.containers.hold = held_by(owners)
    infer = PodView(
        namespace="ml", name="infer", uid="uid-infer", phase="Pending",
        annotations={NPU_CORE_RESOURCE: "2-vir05_1c_16g", "predicate-time": "7"},
        requests={NPU_CORE_RESOURCE: 5}, created=1.0,
    )  # fmt: skip
    pods.items = [infer]
    cores = request([f"npu-core-{i}" for i in range(40, 45)])
    try:
        with pytest.raises(AllocationError) as err:
            await allocator.allocate("npu-core", cores)
        assert status_of(err.value) == grpc.StatusCode.FAILED_PRECONDITION
        assert err.value.message == "Ascend910-2 held by claim uid claim-uid"
        assert exporter.created == [] and pods.patches == []

        owners.release("claim-uid")
        resp = await allocator.allocate("npu-core", cores)
        assert resp.container_responses[0].envs["ASCEND_VISIBLE_DEVICES"] == "101"
        assert exporter.created == [(2, "vir05_1c_16g")]
        assert owners.device_plugin(0.0) == {"Ascend910-2"}
        await allocator.stop()
    finally:
        await exporter.close()
