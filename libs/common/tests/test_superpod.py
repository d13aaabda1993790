"""The node's super pod from its chips' static data: the 950's rack, type and size (setSuperPodInfo).

The A3 half (first answer, int32 ids, main board) is ported in the plugin's
test_reference_node_labels.py, which uses the same functions.
"""

from __future__ import annotations

import pytest
from ascend_common.schemas.exporter import ChipStatic
from ascend_common.schemas.reading import Reading
from ascend_common.superpod import NO_SUPER_POD, SuperPod, super_device_id, super_pod

UNSUPPORTED = Reading[int].error(-8255)


def static(
    pod: int | None, index: int | None, rack: int | None = None, kind: int | None = None, size: int | None = None
) -> ChipStatic:
    def reading(value: int | None) -> Reading[int]:
        return Reading[int].ok(value) if value is not None else Reading[int].error(-8005)

    text = Reading[str].ok("Ascend950PR")
    return ChipStatic(
        chip_type=text,
        chip_name=text,
        chip_version=text,
        aicore=Reading[int].ok(25),
        board_id=Reading[int].ok(0x50),
        product_type=Reading[str].error(-8255),
        partner_card=UNSUPPORTED,
        numa_node=UNSUPPORTED,
        device_ip=Reading[str].error(-8255),
        super_pod_id=reading(pod),
        server_index=reading(index),
        rack_id=UNSUPPORTED if rack is None else reading(rack),
        super_pod_type=UNSUPPORTED if kind is None else reading(kind),
        scale_type=UNSUPPORTED if size is None else reading(size),
    )


def test_a_950_node_reports_rack_type_and_size_of_the_first_chip_that_answered() -> None:
    statics = [static(None, None, 1, 1, 1), static(5, 1, 3, 2, 8192), static(6, 2, 4, 1, 16)]
    assert super_pod(statics) == SuperPod(super_pod_id=5, server_index=1, rack_id=3, super_pod_type=2, scale_type=8192)


def test_the_libraries_none_reads_as_minus_one() -> None:
    """A server outside a pod answers 0xFFFFFFFF for pod, server, rack and size: int32 -1, as the
    reference holds them (and then writes no topology label)."""
    pod = super_pod([static(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0xFFFFFFFF)])
    assert pod == SuperPod(super_pod_id=-1, server_index=-1, rack_id=-1, super_pod_type=0, scale_type=-1)


def test_an_a3_node_has_no_rack_type_or_size() -> None:
    assert super_pod([static(3, 1)]) == SuperPod(super_pod_id=3, server_index=1)


def test_a_chip_whose_rack_failed_still_names_the_pod() -> None:
    """One call answers all six fields, so a partial answer only comes from a hand-made payload:
    the pod is the chip's, the unread fields stay -1."""
    pod = super_pod([static(5, 1, rack=None, kind=2, size=None)])
    assert pod == SuperPod(super_pod_id=5, server_index=1, super_pod_type=2)
    assert super_pod([]) == NO_SUPER_POD


@pytest.mark.parametrize(
    ("rack", "sdid", "expected"),
    [
        pytest.param(3, 1 << 22 | 4, 1 << 22 | 4, id="950 in a pod: its SDID"),
        pytest.param(0, 5, 5, id="rack 0 is a rack"),
        # `int(RackId) < 0` on a uint32 never holds on 64-bit Go: the answer, SDID included, is kept.
        pytest.param(0xFFFFFFFF, 4, 4, id="950 rack none: the SDID is kept"),
        pytest.param(0x80000000, 4, 4, id="rack negative as int32: the SDID is kept"),
        pytest.param(None, 1 << 22 | 9, 1 << 22 | 9, id="A3: no rack reported"),
        pytest.param(3, None, None, id="SDID unread"),
    ],
)
def test_super_device_id_as_the_reference_keeps_it(rack: int | None, sdid: int | None, expected: int | None) -> None:
    chip = static(5, 1, rack).model_copy(
        update={"super_device_id": Reading[int].ok(sdid) if sdid is not None else Reading[int].error(-8005)}
    )
    assert super_device_id(chip) == expected


def test_get_super_pod_type() -> None:
    """TestGetSuperPodType: a 950 node whose chips never answered has an abnormal type; the
    reference's SuperPodTypeAbnormal, -1 here (docs/compatibility.md, the node's super pod)."""
    assert super_pod([]).super_pod_type == -1
    assert super_pod([static(None, None, None, None, None)]).super_pod_type == -1


def test_hw_dev_manager_method_set_super_pod_info() -> None:
    """TestHwDevManagerMethodSetSuperPodInfo: size 8192, pod 1, server 1, rack 1 are kept as read."""
    pod = super_pod([static(1, 1, 1, 2, 8192)])
    assert (pod.rack_id, pod.super_pod_id, pod.server_index, pod.scale_type) == (1, 1, 1, 8192)
