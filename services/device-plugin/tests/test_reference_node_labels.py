"""Node labels and annotations: the reference's tests, ported, and what every simulator profile gets.

Ported from the reference's pkg/server/manager_test.go (TestGetNewNodeLabel, TestAddTopologyLabel_*,
TestSetAcceleratorLabel_*, TestGetNewNodeAnnotation_*), pkg/server/manager_v2_test.go (TestGetCardType),
pkg/server/device_discovery_v2_test.go (TestDeviceDiscovery, "test label node") and
pkg/common/common_test.go (TestIsContainAll300IDuo). One test per Go test, one parameter row per
convey case. The Go tests set `RealCardType` (our chip family) and mock the device manager; here the
same facts are arguments of the pure functions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import pytest
from ascend_common.chip_traits import resource_type
from ascend_common.chips import ChipFamily, detect_family
from ascend_common.naming import chip_name
from ascend_common.products import card_type
from ascend_common.schemas.exporter import ChipStatic
from ascend_common.schemas.reading import Reading
from ascend_common.superpod import NO_SUPER_POD, SuperPod, main_board_id, super_device_id, super_pod
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.node_labels import (
    all_300i_duo,
    node_annotations,
    node_labels,
    topology_labels,
)
from ascend_device_plugin.resources.manager import chip_info as resources_chip_info
from dcmi_exporter.backends.sim import PROFILES, SimBackend

from tests.support.chips import exporter_chip

SUPER_POD_LABEL = "huawei.com/topotree.superpodid"
RACK_LABEL = "huawei.com/topotree.rackid"
SERVER_LABEL = "huawei.com/topotree.serverid"
TOPO = (SUPER_POD_LABEL, RACK_LABEL, SERVER_LABEL)

# The Go tests' fixtures (manager_test.go).
TEST_SUPER_POD_ID, TEST_RACK_ID, TEST_SERVER_INDEX = 2, 4, 6
PRODUCT_TYPE_SERVER, PRODUCT_TYPE_1D, PRODUCT_TYPE_2D, PRODUCT_TYPE_1P_CARD, PRODUCT_TYPE_4P_CARD = 0, 1, 2, 5, 6
A300I_A2_BOARD = 0x28
A5_300I_BOARD, A5_300I_MAIN_BOARD = 0x1A, 0x68


def labels_of(
    family: ChipFamily,
    *,
    chip: str = "testName",
    aicore: int = 8,
    driver: str | None = "v1",
    hbm_mb: int | None = None,
    existing: Mapping[str, str] | None = None,
    board_id: int | None = None,
    product_types: tuple[str | None, ...] = (),
    super_pod: SuperPod = NO_SUPER_POD,
) -> dict[str, str]:
    return node_labels(
        chip,
        family,
        aicore,
        driver,
        resource_type(family),
        hbm_mb,
        existing or {},
        board_id=board_id,
        product_types=product_types,
        super_pod=super_pod,
    )


def chip_info(family: ChipFamily, logic: int = 0, board_id: int | None = None) -> ChipInfo:
    rtype = resource_type(family)
    return ChipInfo(
        logic_id=logic,
        phy_id=logic,
        card_id=logic,
        name=chip_name(rtype, logic),
        rtype=rtype,
        family=family,
        aicore=8,
        healthy=True,
        board_id=board_id,
    )


# ----- manager_test.go: TestGetNewNodeLabel ------------------------------------------------------


def test_get_new_node_label_when_chip_info_error() -> None:
    """Go: the chip name cannot be read -> no labels at all and an error. Here: the rest is still written."""
    labels = labels_of(ChipFamily.ASCEND310, chip="", existing={"servertype": "test server type"})
    assert "node.kubernetes.io/npu.chip.name" not in labels
    assert labels == {"accelerator": "huawei-Ascend310", "huawei.com/driver.version": "v1"}


def test_get_new_node_label_success() -> None:
    labels = labels_of(
        ChipFamily.ASCEND310,
        existing={"servertype": "test server type"},
        board_id=A300I_A2_BOARD,  # a 300I A2 board id on a 310 node: no accelerator-type (910B only)
        product_types=("Atlas 300I Duo",),
    )
    assert labels == {
        "accelerator": "huawei-Ascend310",
        "infer-card-type": "card-300i-duo",
        "node.kubernetes.io/npu.chip.name": "testName",
        "huawei.com/driver.version": "v1",
    }


# ----- manager_test.go: TestAddTopologyLabel_* ---------------------------------------------------


def test_add_topology_label_nil_map_a3() -> None:
    labels = topology_labels(ChipFamily.ASCEND910A3, SuperPod(super_pod_id=TEST_SUPER_POD_ID))
    assert labels[SUPER_POD_LABEL] == str(TEST_SUPER_POD_ID)


def test_add_topology_label_existing_map_a3() -> None:
    labels = labels_of(ChipFamily.ASCEND910A3, super_pod=SuperPod(super_pod_id=TEST_SUPER_POD_ID))
    assert labels[SUPER_POD_LABEL] == str(TEST_SUPER_POD_ID)
    assert labels["node.kubernetes.io/npu.chip.name"] == "testName"  # the other labels stay
    assert labels["accelerator"] == "huawei-Ascend910"


def test_add_topology_label_existing_map_a5() -> None:
    pod = SuperPod(
        super_pod_id=TEST_SUPER_POD_ID,
        rack_id=TEST_RACK_ID,
        server_index=TEST_SERVER_INDEX,
        super_pod_type=PRODUCT_TYPE_2D,
    )
    labels = labels_of(ChipFamily.ASCEND950, super_pod=pod)
    assert labels[SUPER_POD_LABEL] == str(TEST_SUPER_POD_ID)
    assert labels[RACK_LABEL] == str(TEST_RACK_ID)
    assert labels[SERVER_LABEL] == str(TEST_SERVER_INDEX)
    assert labels["node.kubernetes.io/npu.chip.name"] == "testName"


@pytest.mark.parametrize(
    "family",
    [
        pytest.param(ChipFamily.ASCEND910, id="01-Ascend910A"),
        pytest.param(ChipFamily.ASCEND910B, id="02-Ascend910B"),
        pytest.param(ChipFamily.ASCEND310, id="03-Ascend310"),
    ],
)
def test_add_topology_label_non_a3_a5(family: ChipFamily) -> None:
    pod = SuperPod(super_pod_id=TEST_SUPER_POD_ID, rack_id=TEST_RACK_ID, server_index=TEST_SERVER_INDEX)
    assert topology_labels(family, pod) == {}
    assert not set(TOPO) & set(labels_of(family, super_pod=pod))


def test_add_topology_label_a5_negative_server_index() -> None:
    pod = SuperPod(
        super_pod_id=TEST_SUPER_POD_ID, rack_id=TEST_RACK_ID, server_index=-1, super_pod_type=PRODUCT_TYPE_2D
    )
    labels = topology_labels(ChipFamily.ASCEND950, pod)
    assert labels == {SUPER_POD_LABEL: str(TEST_SUPER_POD_ID), RACK_LABEL: str(TEST_RACK_ID)}


def test_add_topology_label_a5_all_negative() -> None:
    pod = SuperPod(super_pod_id=-1, rack_id=-1, server_index=-1, super_pod_type=PRODUCT_TYPE_2D)
    assert topology_labels(ChipFamily.ASCEND950, pod) == {}


@pytest.mark.parametrize(
    "pod_type",
    [
        pytest.param(PRODUCT_TYPE_SERVER, id="TestAddTopologyLabel_A5ServerNoRackId"),
        pytest.param(PRODUCT_TYPE_1P_CARD, id="TestAddTopologyLabel_A5CardNoRackId"),
    ],
)
def test_add_topology_label_a5_server_or_card_has_no_rack_id(pod_type: int) -> None:
    pod = SuperPod(
        super_pod_id=TEST_SUPER_POD_ID, rack_id=TEST_RACK_ID, server_index=TEST_SERVER_INDEX, super_pod_type=pod_type
    )
    labels = topology_labels(ChipFamily.ASCEND950, pod)
    assert labels == {SUPER_POD_LABEL: str(TEST_SUPER_POD_ID), SERVER_LABEL: str(TEST_SERVER_INDEX)}


# ----- manager_test.go: TestSetAcceleratorLabel_* ------------------------------------------------


def test_set_accelerator_label_nil_map() -> None:
    """Go: a nil label map must not panic. Here: a node with nothing readable still gets its labels."""
    labels = labels_of(ChipFamily.ASCEND910B, chip="", driver=None)
    assert labels == {"accelerator": "huawei-Ascend910", "servertype": "Ascend910B-8"}


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        pytest.param(ChipFamily.ASCEND910, "huawei-Ascend910", id="01-Ascend910"),
        pytest.param(ChipFamily.ASCEND910B, "huawei-Ascend910", id="02-Ascend910B"),
        pytest.param(ChipFamily.ASCEND910A3, "huawei-Ascend910", id="03-Ascend910A3"),
        pytest.param(ChipFamily.ASCEND950, "huawei-npu", id="04-Ascend910A5"),
        pytest.param(ChipFamily.ASCEND310, "huawei-Ascend310", id="05-Ascend310"),
        pytest.param(ChipFamily.ASCEND310P, "huawei-Ascend310P", id="06-Ascend310P"),
        # Go: "UnknownType". Our families are a closed set; the one the reference's map lacks is 310B.
        pytest.param(ChipFamily.ASCEND310B, None, id="07-not-in-the-map"),
    ],
)
def test_set_accelerator_label_all_card_types(family: ChipFamily, expected: str | None) -> None:
    assert labels_of(family).get("accelerator") == expected


# ----- manager_test.go: TestGetNewNodeAnnotation_* ------------------------------------------------


@pytest.mark.parametrize(
    ("family", "pod", "rack_id"),
    [
        pytest.param(
            ChipFamily.ASCEND910B,
            SuperPod(super_pod_id=-1, server_index=-1, rack_id=0, super_pod_type=PRODUCT_TYPE_SERVER),
            None,
            id="TestGetNewNodeAnnotation_NonA5NoRackID",
        ),
        pytest.param(
            ChipFamily.ASCEND950,
            SuperPod(super_pod_id=2, server_index=6, rack_id=4, super_pod_type=PRODUCT_TYPE_2D),
            "4",
            id="TestGetNewNodeAnnotation_A5PodHasRackID",
        ),
        pytest.param(
            ChipFamily.ASCEND950,
            SuperPod(super_pod_id=2, server_index=6, rack_id=4, super_pod_type=PRODUCT_TYPE_SERVER),
            None,
            id="TestGetNewNodeAnnotation_A5ServerNoRackID",
        ),
        pytest.param(
            ChipFamily.ASCEND950,
            SuperPod(super_pod_id=2, server_index=6, rack_id=4, super_pod_type=PRODUCT_TYPE_1P_CARD),
            None,
            id="TestGetNewNodeAnnotation_A5CardNoRackID",
        ),
        pytest.param(
            ChipFamily.ASCEND910A3,
            SuperPod(super_pod_id=2, server_index=6, rack_id=0, super_pod_type=PRODUCT_TYPE_SERVER),
            None,
            id="TestGetNewNodeAnnotation_A3NoRackID",
        ),
    ],
)
def test_get_new_node_annotation_rack_id(family: ChipFamily, pod: SuperPod, rack_id: str | None) -> None:
    annotations = node_annotations([chip_info(family)], pod)
    assert annotations.get("rackID") == rack_id
    assert annotations["superPodID"] == str(pod.super_pod_id)
    assert annotations["serverIndex"] == str(pod.server_index)


def test_get_new_node_annotation_card_type_not_empty() -> None:
    """Go mocks getCardType to "testCardType"; here the board and main board that make one."""
    chips = [chip_info(ChipFamily.ASCEND950, board_id=A5_300I_BOARD)]
    pod = SuperPod(super_pod_id=2, server_index=6, rack_id=4, super_pod_type=PRODUCT_TYPE_2D)
    annotations = node_annotations(chips, pod, main_board_id=A5_300I_MAIN_BOARD)
    assert annotations["cardType"] == "300I-Atlas350"


# ----- manager_v2_test.go: TestGetCardType -------------------------------------------------------


@pytest.mark.parametrize(
    ("board", "main_board", "expected"),
    [
        pytest.param(None, A5_300I_MAIN_BOARD, None, id="get board info error"),
        pytest.param(A5_300I_BOARD, A5_300I_MAIN_BOARD, "300I-Atlas350", id="success"),
        pytest.param(A300I_A2_BOARD, A5_300I_MAIN_BOARD, None, id="failed"),
    ],
)
def test_get_card_type(board: int | None, main_board: int | None, expected: str | None) -> None:
    assert card_type(board, main_board) == expected
    chips = [chip_info(ChipFamily.ASCEND950, board_id=board)]
    assert node_annotations(chips, main_board_id=main_board).get("cardType") == expected


# ----- device_discovery_v2_test.go: TestDeviceDiscovery, "test label node" ------------------------


def test_device_discovery_label_node_server_type() -> None:
    """Go checks the string it builds ("Ascend910A5-25"); the label the A5 writes is npu-<AI cores>."""
    labels = labels_of(ChipFamily.ASCEND950, chip="Ascend950PR", aicore=25)
    assert labels["servertype"] == "npu-25"


def test_device_discovery_label_node_chip_name() -> None:
    labels = labels_of(ChipFamily.ASCEND950, chip="Ascend950PR", aicore=25)
    assert labels["node.kubernetes.io/npu.chip.name"] == "Ascend950PR"


# ----- common_test.go: TestIsContainAll300IDuo ---------------------------------------------------


@pytest.mark.parametrize(
    ("products", "expected"),
    [
        pytest.param((), False, id="01-productType length is zero"),
        pytest.param(("Atlas 300I Duo",), True, id="02-productType has Atlas300IDuo"),
        pytest.param(("Atlas 300I Duo", "other type"), False, id="03-productType has other type"),
    ],
)
def test_is_contain_all_300i_duo(products: tuple[str, ...], expected: bool) -> None:
    assert all_300i_duo(products) is expected
    assert ("infer-card-type" in labels_of(ChipFamily.ASCEND310P, product_types=products)) is expected


# ----- every simulator profile -------------------------------------------------------------------

# What the a3-16 profile's chips report through dcmi_get_device_info (struct dcmi_spod_info).
A3_POD = SuperPod(super_pod_id=3, server_index=1)

# The a5-superpod-8 profile: a node of a 2D pod (type 2), rack 3 of super pod 5, of a pod of 8192.
A5_POD = SuperPod(super_pod_id=5, server_index=1, rack_id=3, super_pod_type=PRODUCT_TYPE_2D, scale_type=8192)
# A 950 node outside a super pod: its chips answer the library's "none" (0xFFFFFFFF, -1 as int32)
# for everything but the type.
A5_NO_POD = SuperPod(super_pod_id=-1, server_index=-1, rack_id=-1, super_pod_type=PRODUCT_TYPE_SERVER, scale_type=-1)
# The 950 nodes outside a super pod (a5-8 and both Atlas 350 card profiles): no topology label.
A5_LABELS = {
    "node.kubernetes.io/npu.chip.name": "Ascend950PR",
    "servertype": "npu-25",
    "huawei.com/driver.version": "24.1.rc2",
    "accelerator": "huawei-npu",
    "mind-cluster/npu-chip-memory": "128G",
}

# profile: (labels, annotations other than baseDeviceInfos, super pod the node reports)
PROFILE_TABLE: dict[str, tuple[dict[str, str], dict[str, str], SuperPod]] = {
    "910b-8": (
        {
            "node.kubernetes.io/npu.chip.name": "910B3",
            "servertype": "Ascend910B-20",
            "huawei.com/driver.version": "24.1.rc2",
            "accelerator": "huawei-Ascend910",
            "mind-cluster/npu-chip-memory": "64G",
        },
        {"superPodID": "-1", "serverIndex": "-1", "serverType": ""},
        NO_SUPER_POD,
    ),
    "910b-infer-4": (
        {
            "node.kubernetes.io/npu.chip.name": "910B4",
            "servertype": "Ascend910B-20",
            "huawei.com/driver.version": "24.1.rc2",
            "accelerator": "huawei-Ascend910",
            "mind-cluster/npu-chip-memory": "32G",
            "accelerator-type": "card-910b-infer",
        },
        {"superPodID": "-1", "serverIndex": "-1", "serverType": ""},
        NO_SUPER_POD,
    ),
    "910a-8": (
        {
            "node.kubernetes.io/npu.chip.name": "910A",
            "servertype": "Ascend910-32",
            "huawei.com/driver.version": "24.1.rc2",
            "accelerator": "huawei-Ascend910",
            "mind-cluster/npu-chip-memory": "32G",
        },
        {"superPodID": "-1", "serverIndex": "-1", "serverType": ""},
        NO_SUPER_POD,
    ),
    "a3-16": (
        {
            "node.kubernetes.io/npu.chip.name": "910B3",
            "servertype": "Ascend910A3-24",
            "huawei.com/driver.version": "24.1.rc2",
            "accelerator": "huawei-Ascend910",
            "mind-cluster/npu-chip-memory": "64G",
            "huawei.com/topotree.superpodid": "3",
        },
        {"superPodID": "3", "serverIndex": "1", "serverType": "A3"},
        A3_POD,
    ),
    "310p-duo-4": (
        {
            "node.kubernetes.io/npu.chip.name": "310P3",
            "servertype": "Ascend310P-8",
            "huawei.com/driver.version": "24.1.rc2",
            "accelerator": "huawei-Ascend310P",
            "infer-card-type": "card-300i-duo",
        },
        {"superPodID": "-1", "serverIndex": "-1", "serverType": ""},
        NO_SUPER_POD,
    ),
    "a5-superpod-8": (
        {
            "node.kubernetes.io/npu.chip.name": "Ascend950DT",
            "servertype": "npu-25",
            "huawei.com/driver.version": "24.1.rc2",
            "accelerator": "huawei-npu",
            "mind-cluster/npu-chip-memory": "144G",
            "huawei.com/topotree.superpodid": "5",
            "huawei.com/topotree.rackid": "3",
            "huawei.com/topotree.serverid": "1",
        },
        {"superPodID": "5", "serverIndex": "1", "serverType": "npu", "rackID": "3"},
        A5_POD,
    ),
    "a5-8": (
        A5_LABELS,
        {"superPodID": "-1", "serverIndex": "-1", "serverType": "npu"},
        A5_NO_POD,
    ),
    "a5-atlas350-4": (
        A5_LABELS,
        {"superPodID": "-1", "serverIndex": "-1", "serverType": "npu", "cardType": "300I-Atlas350"},
        dataclasses.replace(A5_NO_POD, super_pod_type=PRODUCT_TYPE_1P_CARD),
    ),
    "a5-atlas350-4p": (
        A5_LABELS,
        {"superPodID": "-1", "serverIndex": "-1", "serverType": "npu", "cardType": "300I-Atlas350-4p"},
        dataclasses.replace(A5_NO_POD, super_pod_type=PRODUCT_TYPE_4P_CARD),
    ),
    "310p-4": (
        {
            "node.kubernetes.io/npu.chip.name": "310P3",
            "servertype": "Ascend310P-8",
            "huawei.com/driver.version": "24.1.rc2",
            "accelerator": "huawei-Ascend310P",
        },
        {"superPodID": "-1", "serverIndex": "-1", "serverType": ""},
        NO_SUPER_POD,
    ),
}


def test_the_table_covers_every_sim_profile() -> None:
    assert sorted(PROFILE_TABLE) == sorted(PROFILES)


@pytest.mark.parametrize("profile", sorted(PROFILE_TABLE))
def test_labels_and_annotations_of_every_sim_profile(profile: str) -> None:
    expected_labels, expected_annotations, pod = PROFILE_TABLE[profile]
    backend = SimBackend(profile)
    try:
        # The reference reads the chip name, board and memory of its first device (lowest logic id).
        addresses = sorted(backend.discover(), key=lambda a: a.logic_id)
        statics = [backend.read_static(a) for a in addresses]
        hbm = backend.read_dynamic(addresses[0]).hbm.value
        version = backend.version().value
    finally:
        backend.close()
    infos: list[ChipInfo] = []
    for address, static in zip(addresses, statics, strict=True):
        assert static.chip_name.value is not None and static.aicore.value is not None
        family = detect_family(static.chip_name.value, static.board_id.value)
        rtype = resource_type(family)
        infos.append(
            ChipInfo(
                logic_id=address.logic_id,
                phy_id=address.phy_id,
                card_id=address.card_id,
                name=chip_name(rtype, address.phy_id),
                rtype=rtype,
                family=family,
                aicore=static.aicore.value,
                healthy=True,
                device_ip=static.device_ip.value,
                board_id=static.board_id.value,
                product_type=static.product_type.value,
                super_device_id=super_device_id(static),
            )
        )
    assert super_pod(statics) == pod
    first = infos[0]
    labels = node_labels(
        statics[0].chip_name.value or "",
        first.family,
        first.aicore,
        version,
        first.rtype,
        hbm.total_mb if hbm is not None else None,
        {},
        board_id=first.board_id,
        product_types=[c.product_type for c in infos],
        super_pod=pod,
    )
    annotations = node_annotations(infos, pod, main_board_id=main_board_id(statics))
    assert labels == expected_labels
    base = json.loads(annotations.pop("baseDeviceInfos"))
    assert annotations == expected_annotations
    # The SDID of a super-pod chip (A3, 950): its server index above bit 22, its phy id below bit 16.
    # A 950 chip outside a super pod (server 0 in the sim) keeps the SDID it answered: its rack id is
    # the library's "none", but the reference's `int(RackId) < 0` on a uint32 never holds, so its
    # answer is not skipped. 0 elsewhere (no super-pod answer).
    sdid = {
        c.name: (
            1 << 22 | c.phy_id
            if profile in ("a3-16", "a5-superpod-8")
            else c.phy_id
            if profile.startswith("a5-")
            else 0
        )
        for c in infos
    }
    # A 950 chip's entry leads with its logic id (NpuBaseInfo.DeviceID, set on Ascend910A5 only).
    lead = {c.name: ({"DeviceID": c.logic_id} if profile.startswith("a5-") else {}) for c in infos}
    assert base == {c.name: {**lead[c.name], "IP": c.device_ip or "", "SuperDeviceID": sdid[c.name]} for c in infos}
    if profile.startswith("a5-"):  # the logic id comes first, as the Go struct has it
        assert all(next(iter(entry)) == "DeviceID" for entry in base.values())


# ----- the node's super pod and main board, from the chips' static data ----------------------


def a3_static(pod_id: int | None, index: int | None, sdid: int | None, board: int | None = 0x18) -> ChipStatic:
    def reading(value: int | None) -> Reading[int]:
        return Reading[int].ok(value) if value is not None else Reading[int].error(-8005)

    base = exporter_chip(0, 0, board=0xB0).static
    return base.model_copy(
        update={
            "super_pod_id": reading(pod_id),
            "server_index": reading(index),
            "super_device_id": reading(sdid),
            "main_board_id": reading(board),
        }
    )


def test_super_pod_is_the_first_answer() -> None:
    """getSuperPodInfo: a chip that failed is skipped, the first that answered names the pod."""
    statics = [a3_static(None, None, None), a3_static(9, 2, 2 << 22), a3_static(8, 1, 1 << 22 | 1)]
    assert super_pod(statics) == SuperPod(super_pod_id=9, server_index=2)
    assert super_pod(statics[:1]) == NO_SUPER_POD
    assert super_pod([]) == NO_SUPER_POD


def test_super_pod_ids_are_go_int32() -> None:
    """The reference holds the ids as int32: bit 31 set reads negative, so no topology label."""
    pod = super_pod([a3_static(0xFFFFFFFF, 0x80000000, 0)])
    assert pod == SuperPod(super_pod_id=-1, server_index=-(2**31))
    assert topology_labels(ChipFamily.ASCEND910A3, pod) == {}


def test_sdid_reaches_chip_info_unsigned() -> None:
    chip = exporter_chip(0, 5, board=0xB0).model_copy(update={"static": a3_static(3, 1023, 1023 << 22 | 5)})
    info = resources_chip_info(chip, True)
    assert info is not None and info.super_device_id == 1023 << 22 | 5
    unread = resources_chip_info(exporter_chip(0, 5), True)
    assert unread is not None and unread.super_device_id is None


def test_main_board_id_skips_the_invalid_id() -> None:
    """SetValidMainBoardInfo: 0xFFFFFFFF and failed reads are skipped; the first valid id wins."""
    statics = [a3_static(3, 1, 0, board=None), a3_static(3, 1, 0, board=0xFFFFFFFF), a3_static(3, 1, 0, board=0x19)]
    assert main_board_id(statics) == 0x19
    assert main_board_id(statics[:2]) is None
