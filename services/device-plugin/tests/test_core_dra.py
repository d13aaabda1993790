"""The ResourceSlice body and the claim checks of the DRA driver (dra.slice_devices, dra.claims).

Chips come from tests/support/chips (shaped like the sim's 910b-8 and a5-superpod-8). The CEL
selectors are evaluated with cel-python against the devices as the scheduler sees them
(`device.attributes["npu.huawei.com"].<name>`), so a selector the docs show is checked here.
"""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from ascend_common.chips import ChipFamily
from ascend_common.schemas.exporter import Chip, Hbm
from ascend_common.schemas.reading import Reading
from ascend_common.superpod import NO_SUPER_POD, SuperPod, super_pod
from ascend_device_plugin.dra.claims import (
    CDI_KIND,
    ClaimDevice,
    ClaimError,
    cdi_device_id,
    cdi_spec,
    cdi_spec_name,
    claim_devices,
)
from ascend_device_plugin.dra.slice_devices import (
    API_VERSIONS,
    DRIVER,
    DeviceTaint,
    DraDevice,
    chip_name,
    device_name,
    dra_devices,
    pool_devices,
    resource_slice,
    slice_name,
    unhealthy_taint,
    written_taints,
)
from celpy.adapter import json_to_cel

from tests.support.chips import exporter_chip, node_910b, node_950
from tests.support.kube_validation import is_dns1123_label, validate_resource_slice

EVERY_910B_ATTRIBUTE = {
    "deviceType", "physicId", "logicId", "numaNode", "cardId", "hccsRing", "superPodId", "serverIndex",
}  # fmt: skip
EVERY_950_ATTRIBUTE = EVERY_910B_ATTRIBUTE | {"rackId"}


def with_hbm(chips: dict[int, Chip], total_mb: int = 65536) -> dict[int, Chip]:
    out = {}
    for logic, chip in chips.items():
        assert chip.dynamic is not None
        dynamic = chip.dynamic.model_copy(update={"hbm": Reading[Hbm].ok(Hbm(total_mb=total_mb, used_mb=0))})
        out[logic] = chip.model_copy(update={"dynamic": dynamic})
    return out


def node_pod(chips: dict[int, Chip]) -> SuperPod:
    return super_pod(c.static for c in sorted(chips.values(), key=lambda c: c.card_id))


# ---- the slice ----------------------------------------------------------------------------------


def test_910b_8_has_eight_devices_named_as_dns_labels_with_every_attribute() -> None:
    chips = with_hbm(node_910b())
    devices = dra_devices(chips.values(), node_pod(chips))
    assert [d.name for d in devices] == [f"ascend910-{phy}" for phy in range(8)]
    for d in devices:
        chip = next(c for c in chips.values() if c.phy_id == d.phy_id)
        assert set(d.attributes) == EVERY_910B_ATTRIBUTE, d.name
        assert d.attributes["deviceType"] == "Ascend910B"
        assert d.attributes["physicId"] == chip.phy_id
        assert d.attributes["logicId"] == chip.logic_id
        assert d.attributes["numaNode"] == (0 if chip.phy_id < 4 else 1)
        assert d.attributes["cardId"] == chip.card_id
        # One HCCS ring of 8 on a 910B training board: every chip is in the ring of logic id 0.
        assert d.attributes["hccsRing"] == 0
        # A 910B node is in no super pod: -1, as the plugin's labels say it.
        assert (d.attributes["superPodId"], d.attributes["serverIndex"]) == (-1, -1)
        assert d.capacity == {"hbm": "65536Mi"}


def test_a5_superpod_8_names_npu_phy_with_super_pod_and_rack() -> None:
    chips = with_hbm(node_950(super_pod_id=5, server_index=1, rack_id=3), 131072)
    devices = dra_devices(chips.values(), node_pod(chips))
    assert [d.name for d in devices] == [f"npu-{phy}" for phy in range(8)]
    for d in devices:
        assert set(d.attributes) == EVERY_950_ATTRIBUTE, d.name
        assert d.attributes["deviceType"] == "Ascend910A5"  # the reference's dev type for the 950
        assert (d.attributes["superPodId"], d.attributes["serverIndex"], d.attributes["rackId"]) == (5, 1, 3)
        assert d.attributes["cardId"] == -1  # the v2 library reports no card
        # Ring size 1 on the 950 (Ascend910A5RingsNum): each chip is its own ring.
        assert d.attributes["hccsRing"] == d.attributes["logicId"]
        assert d.capacity == {"hbm": "131072Mi"}


@pytest.mark.parametrize("nodes", [node_910b, node_950], ids=["910b-8", "a5-superpod-8"])
@pytest.mark.parametrize("version", API_VERSIONS)
def test_the_slice_of_every_family_passes_the_apiservers_validation(nodes: Any, version: str) -> None:
    # The reference's `Ascend910-<phy>` is refused by a real apiserver (a device name is a DNS
    # label); the fake's validation is the real one's rules, so this fails on such a name.
    chips = with_hbm(nodes())
    body = resource_slice("node-a", dra_devices(chips.values(), node_pod(chips)), 1, version)
    assert validate_resource_slice(body) == []
    assert all(is_dns1123_label(d["name"]) for d in body["spec"]["devices"])


@pytest.mark.parametrize(
    ("chip", "device"),
    [("Ascend910-0", "ascend910-0"), ("Ascend910-15", "ascend910-15"), ("npu-7", "npu-7"),
     ("Ascend310P-3", "ascend310p-3"), ("Ascend310-1", "ascend310-1")],
)  # fmt: skip
def test_a_device_name_is_the_chip_name_as_a_dns_label_and_maps_back(chip: str, device: str) -> None:
    assert device_name(chip) == device and is_dns1123_label(device)
    assert device_name(device) == device  # a name already current (and the checkpoint's old one) maps the same
    assert chip_name(device) == chip


def test_an_unread_hbm_publishes_no_capacity_and_an_unread_numa_minus_one() -> None:
    chip = exporter_chip(0, 0, numa=None)
    (device,) = dra_devices([chip], NO_SUPER_POD)
    assert device.capacity == {}
    assert device.attributes["numaNode"] == -1


def test_a_chip_of_unknown_family_is_no_device() -> None:
    chip = exporter_chip(0, 0).model_copy(update={"family": None, "resource_type": None})
    assert dra_devices([chip], NO_SUPER_POD) == []


@pytest.mark.parametrize(
    ("healthy", "expected"),
    [
        pytest.param({p: True for p in range(8)}, list(range(8)), id="all healthy"),
        pytest.param({**{p: True for p in range(8)}, 3: False}, [0, 1, 2, 4, 5, 6, 7], id="chip 3 faulty"),
        pytest.param({p: True for p in range(7)}, list(range(7)), id="a chip without a decision is not offered"),
        pytest.param({}, [], id="nothing decided yet"),
    ],
)
def test_the_pool_offers_the_healthy_chips_only(healthy: dict[int, bool], expected: list[int]) -> None:
    devices = dra_devices(node_910b().values(), NO_SUPER_POD)
    assert [d.phy_id for d in pool_devices(devices, healthy)] == expected


UNHEALTHY = "npu.huawei.com/unhealthy"


@pytest.mark.parametrize(
    ("fault", "noexecute", "taint"),
    [
        pytest.param("SeparateNPU", (), DeviceTaint(UNHEALTHY, "SeparateNPU", "NoSchedule"), id="default: NoSchedule"),
        pytest.param("card_drop", (), DeviceTaint(UNHEALTHY, "card_drop", "NoSchedule"), id="exporter state"),
        pytest.param("SeparateNPU", ("SeparateNPU", "card_drop"), DeviceTaint(UNHEALTHY, "SeparateNPU", "NoExecute"),
                     id="listed level: NoExecute"),
        pytest.param("RestartNPU", ("SeparateNPU",), DeviceTaint(UNHEALTHY, "RestartNPU", "NoSchedule"),
                     id="level not listed: NoSchedule"),
        pytest.param("", (), DeviceTaint(UNHEALTHY, "", "NoSchedule"), id="no reason known: no value"),
    ],
)  # fmt: skip
def test_an_unhealthy_chip_is_tainted_with_its_fault(
    fault: str, noexecute: tuple[str, ...], taint: DeviceTaint
) -> None:
    assert unhealthy_taint(fault, noexecute) == taint


@pytest.mark.parametrize(
    ("healthy", "faults", "offered"),
    [
        pytest.param({p: True for p in range(8)}, {}, {p: () for p in range(8)}, id="all healthy: no taint"),
        pytest.param({**{p: True for p in range(8)}, 3: False}, {3: "SeparateNPU"},
                     {**{p: () for p in range(8)}, 3: (DeviceTaint(UNHEALTHY, "SeparateNPU", "NoSchedule"),)},
                     id="taints kept: chip 3 stays, tainted"),
        pytest.param({**{p: True for p in range(8)}, 3: False}, None, {p: () for p in range(8) if p != 3},
                     id="taints not kept: chip 3 leaves"),
        pytest.param({**{p: True for p in range(8)}, 3: False, 5: False}, {3: "card_drop"},
                     {**{p: () for p in range(8) if p != 5}, 3: (DeviceTaint(UNHEALTHY, "card_drop", "NoExecute"),)},
                     id="chip 5 held by the device plugin (no fault given): leaves; chip 3 NoExecute"),
        pytest.param({p: True for p in range(7)}, {}, {p: () for p in range(7)},
                     id="a chip without a decision is not offered"),
    ],
)  # fmt: skip
def test_the_pool_taints_or_leaves_out_what_is_not_healthy(
    healthy: dict[int, bool], faults: dict[int, str] | None, offered: dict[int, tuple[DeviceTaint, ...]]
) -> None:
    devices = dra_devices(node_910b().values(), NO_SUPER_POD)
    pool = pool_devices(devices, healthy, faults, noexecute_levels=("card_drop",))
    assert {d.phy_id: d.taints for d in pool} == offered


@pytest.mark.parametrize("version", API_VERSIONS)
def test_a_tainted_slice_passes_validation_and_keeps_the_time_the_apiserver_gave(version: str) -> None:
    devices = dra_devices(node_910b().values(), NO_SUPER_POD)
    pool = pool_devices(devices, {p: p != 2 for p in range(8)}, {2: "SeparateNPU"})
    taint = DeviceTaint(UNHEALTHY, "SeparateNPU", "NoSchedule")
    body = resource_slice("node-a", pool, 2, version)
    assert validate_resource_slice(body) == []
    third = body["spec"]["devices"][2]
    assert (third if version == "v1" else third["basic"])["taints"] == [
        {"key": UNHEALTHY, "value": "SeparateNPU", "effect": "NoSchedule"}
    ]
    assert written_taints(body) == {("ascend910-2", taint): ""}
    since = {("ascend910-2", taint): "2026-01-02T03:04:05Z"}
    again = resource_slice("node-a", pool, 3, version, since)
    assert written_taints(again) == since
    assert validate_resource_slice(again) == []
    untainted = resource_slice("node-a", devices, 4, version, since)
    assert written_taints(untainted) is None


def test_v1_slice_has_flat_devices_and_the_node_pool() -> None:
    devices = dra_devices(with_hbm(node_910b()).values(), NO_SUPER_POD)
    body = resource_slice("node-a", devices, 7, "v1")
    assert body["apiVersion"] == "resource.k8s.io/v1"
    assert body["kind"] == "ResourceSlice"
    assert body["metadata"]["name"] == "node-a-npu.huawei.com"
    spec = body["spec"]
    assert spec["driver"] == DRIVER
    assert spec["nodeName"] == "node-a"
    assert spec["pool"] == {"name": "node-a", "generation": 7, "resourceSliceCount": 1}
    first = spec["devices"][0]
    assert first["name"] == "ascend910-0"
    assert first["attributes"]["deviceType"] == {"string": "Ascend910B"}
    assert first["attributes"]["physicId"] == {"int": 0}
    assert first["capacity"] == {"hbm": {"value": "65536Mi"}}
    assert "basic" not in first


def test_v1beta1_slice_keeps_the_device_under_basic() -> None:
    devices = dra_devices(node_910b().values(), NO_SUPER_POD)
    first = resource_slice("node-a", devices, 1, "v1beta1")["spec"]["devices"][0]
    assert set(first) == {"name", "basic"}
    assert first["basic"]["attributes"]["logicId"] == {"int": 4}  # node_910b: phy 0 is logic 4
    assert "capacity" not in first["basic"]  # no hbm read: no capacity at all


def test_an_unknown_api_version_is_refused() -> None:
    with pytest.raises(ValueError, match="v1alpha3"):
        resource_slice("n", [], 1, "v1alpha3")


def test_a_long_node_name_keeps_the_slice_name_within_253() -> None:
    name = slice_name("n" * 253)
    assert len(name) == 253
    assert name.endswith("-npu.huawei.com")


# ---- CEL selectors, as a claim's DeviceClass or request writes them --------------------------------


def cel_matches(expression: str, devices: list[DraDevice]) -> list[str]:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    matched = []
    for d in devices:
        attrs = json_to_cel({DRIVER: dict(d.attributes)})
        device = celpy.celtypes.MapType({celpy.celtypes.StringType("attributes"): attrs})
        activation: dict[str, Any] = {"device": device}
        if program.evaluate(activation):
            matched.append(d.name)
    return matched


def test_cel_numa_node_1_matches_exactly_the_chips_of_numa_1() -> None:
    chips = node_910b()
    devices = dra_devices(chips.values(), node_pod(chips))
    expected = sorted(f"ascend910-{c.phy_id}" for c in chips.values() if c.static.numa_node.value == 1)
    assert expected  # the profile has chips on NUMA 1, so the match below is not vacuous
    assert sorted(cel_matches('device.attributes["npu.huawei.com"].numaNode == 1', devices)) == expected


def test_cel_device_type_as_the_device_class_selects() -> None:
    devices = dra_devices(node_910b().values(), NO_SUPER_POD) + dra_devices(node_950().values(), NO_SUPER_POD)
    matched = cel_matches('device.attributes["npu.huawei.com"].deviceType == "Ascend910A5"', devices)
    assert matched == [f"npu-{p}" for p in range(8)]


# ---- claims -------------------------------------------------------------------------------------

CHIPS = {f"ascend910-{p}": p for p in range(8)}


def claim(results: list[dict[str, Any]] | None, *, uid: str = "u1", allocated: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = {"devices": {"results": results or []}}
    return {"metadata": {"namespace": "ns", "name": "c", "uid": uid}, "status": status}


def result(device: str, *, pool: str = "node-a", driver: str = DRIVER, request: str = "npu") -> dict[str, str]:
    return {"request": request, "driver": driver, "pool": pool, "device": device}


@pytest.mark.parametrize(
    ("body", "uid", "match"),
    [
        pytest.param(claim([result("ascend910-3")]), "other", "has uid 'u1'", id="recreated claim"),
        pytest.param(claim(None, allocated=False), "u1", "not allocated", id="unallocated"),
        pytest.param(claim([result("ascend910-3", pool="node-b")]), "u1", "pool 'node-b'", id="another node's pool"),
        pytest.param(claim([result("ascend910-9")]), "u1", "'ascend910-9' is not a chip", id="unknown device"),
        pytest.param(claim([result("gpu-0", driver="gpu.example")]), "u1", "no device of driver", id="other driver"),
        pytest.param(claim([]), "u1", "no device of driver", id="no results"),
        pytest.param(claim([result("ascend910-1"), result("ascend910-1")]), "u1", "twice", id="device twice"),
        pytest.param(
            claim([result("ascend910-1"), result("ascend910-9")]), "u1", "ascend910-9", id="one bad result refuses all"
        ),
    ],
)
def test_bad_claims_are_refused_with_a_reason(body: dict[str, Any], uid: str, match: str) -> None:
    with pytest.raises(ClaimError, match=match):
        claim_devices(body, uid=uid, node="node-a", chips=CHIPS)


def test_a_good_claim_gives_our_chips_and_skips_other_drivers() -> None:
    body = claim([result("ascend910-3", request="a"), result("gpu-0", driver="gpu.example.com"), result("ascend910-5")])
    assert claim_devices(body, uid="u1", node="node-a", chips=CHIPS) == [
        ClaimDevice("a", "ascend910-3", 3),
        ClaimDevice("npu", "ascend910-5", 5),
    ]


# ---- the CDI spec (ascend-common/cdi spec_build_test.go, devnode_shared_test.go) -----------------

ALL_SHARED = frozenset({"/dev/davinci_manager", "/dev/hisi_hdc", "/dev/devmm_svm", "/dev/dvpp_cmdlist"})


def test_cdi_names_are_the_reference_transient_spec_and_device_ids() -> None:
    assert cdi_spec_name("1234-abcd") == "ascend.com-npu_1234-abcd"
    assert cdi_device_id(3) == "ascend.com/npu=3"


def test_build_spec_single_device_checks() -> None:
    # TestBuildSpec_SingleDeviceChecks / _SingleDeviceEdgeCases: one device node per chip, 4 shared nodes on a 910.
    spec = cdi_spec(
        [ClaimDevice("npu", "ascend910-7", 7)], family=ChipFamily.ASCEND910B, logic_by_phy={7: 7},
        host_dev_nodes=ALL_SHARED,
    )  # fmt: skip
    assert spec["kind"] == CDI_KIND
    (device,) = spec["devices"]
    assert device == {
        "name": "7",
        "containerEdits": {
            "deviceNodes": [{"path": "/dev/davinci7", "hostPath": "/dev/davinci7", "permissions": "rw"}],
        },
    }
    assert len(spec["containerEdits"]["deviceNodes"]) == 4
    assert spec["containerEdits"]["env"][0] == "ASCEND_VISIBLE_DEVICES=7"


def test_build_spec_multiple_logic_ids() -> None:
    # TestBuildSpec_MultipleLogicIDs: a device per id, in order, each its own davinci node.
    devices = [ClaimDevice("npu", f"ascend910-{p}", p) for p in (3, 4, 5)]
    spec = cdi_spec(devices, family=ChipFamily.ASCEND910B, logic_by_phy={}, host_dev_nodes=frozenset())
    assert [d["containerEdits"]["deviceNodes"][0]["path"] for d in spec["devices"]] == [
        "/dev/davinci3", "/dev/davinci4", "/dev/davinci5",
    ]  # fmt: skip
    assert "ASCEND_VISIBLE_DEVICES=3,4,5" in spec["containerEdits"]["env"]
    assert "deviceNodes" not in spec["containerEdits"]  # no shared node found on the host: none written


def test_generate_shared_nodes_ascend910a5_with_ub_devices() -> None:
    # TestGenerateSharedNodes_Ascend910A5 + _UBDevicesPresent: the 950 has no dvpp_cmdlist nor devmm_svm
    # on its hosts (the plugin takes what exists), and every UB file is shared by the claim.
    spec = cdi_spec(
        [ClaimDevice("npu", "npu-1", 1)], family=ChipFamily.ASCEND950, logic_by_phy={1: 5},
        host_dev_nodes=frozenset({"/dev/davinci_manager", "/dev/hisi_hdc"}),
        ub_devices=["/dev/uburma/ub0", "/dev/ummu/u0"], hccl_topo="/usr/local/Ascend/driver/topo/pod.json",
    )  # fmt: skip
    shared = [n["path"] for n in spec["containerEdits"]["deviceNodes"]]
    assert shared == ["/dev/davinci_manager", "/dev/hisi_hdc", "/dev/uburma/ub0", "/dev/ummu/u0"]
    # Outside Volcano the 950's runtime is told logic ids (getFinalVisibleDevices), as by Allocate.
    assert "ASCEND_VISIBLE_DEVICES=5" in spec["containerEdits"]["env"]
    assert "HCCL_TOPO_FILE_PATH=/usr/local/Ascend/driver/topo/pod.json" in spec["containerEdits"]["env"]
