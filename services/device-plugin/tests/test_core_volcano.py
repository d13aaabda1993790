"""The Volcano path of Allocate (contract section 4)."""

from __future__ import annotations

import itertools
import re

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_device_plugin.allocation.annotations import PREDICATE_TIME, TAKEN, taken_patch
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.volcano.annotations import (
    DynamicRequest,
    annotated_chips,
    annotation_key,
    kubelet_map,
    may_serve,
    parse_npu_core,
    parse_predicate_time,
    parse_real_devices,
    pick_pod,
)
from hypothesis import given
from hypothesis import strategies as st

R910 = ResourceType.ASCEND910
RES = "huawei.com/Ascend910"
CORE = "huawei.com/npu-core"


def pod(
    name: str,
    devices: str | None = "Ascend910-0,Ascend910-1",
    time: str | None = "100",
    *,
    resource: str = RES,
    request: int = 2,
    phase: str = "Pending",
    deleting: bool = False,
    created: float = 0.0,
    namespace: str = "default",
) -> PodView:
    annotations: dict[str, str] = {}
    if devices is not None:
        annotations[resource] = devices
    if time is not None:
        annotations[PREDICATE_TIME] = time
    return PodView(
        namespace=namespace,
        name=name,
        uid=f"uid-{name}",
        phase=phase,
        annotations=annotations,
        requests={resource: request} if request else {},
        deleting=deleting,
        created=created,
    )


def test_constants_and_patch() -> None:
    assert TAKEN == "18446744073709551615" == str(2**64 - 1)
    assert taken_patch() == {"predicate-time": "18446744073709551615"}
    assert annotation_key("Ascend910") == RES
    assert annotation_key("npu-core") == CORE


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Ascend910-0", ["Ascend910-0"]),
        ("Ascend910-1,Ascend910-0", ["Ascend910-1", "Ascend910-0"]),  # annotation order is kept
        (" Ascend910-0 , Ascend910-10 ", ["Ascend910-0", "Ascend910-10"]),
        (",".join(f"Ascend910-{i}" for i in range(64)), [f"Ascend910-{i}" for i in range(64)]),
    ],
)
def test_parse_real_devices(value: str, expected: list[str]) -> None:
    assert parse_real_devices(value, R910) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "empty item at position 0"),
        ("Ascend910-0,,Ascend910-1", "empty item at position 1"),
        ("Ascend910-0,", "empty item at position 1"),
        ("Ascend910-0,Ascend910-0", "'Ascend910-0' twice"),
        ("Ascend910-0, Ascend910-0", "'Ascend910-0' twice"),
        ("Ascend910-0,Ascend310P-1", "'Ascend310P-1' is not a Ascend910 chip"),
        ("Ascend910-2c-100-0", "'Ascend910-2c-100-0' is not a Ascend910 chip"),
        ("Ascend910-0-1", "'Ascend910-0-1' is not a Ascend910 chip"),
        ("Ascend910-01", "'Ascend910-01' is not in canonical form 'Ascend910-1'"),
        ("Ascend910-x", "'Ascend910-x' is not a device id"),
        ("0,1", "'0' is not a device id"),
        (",".join(f"Ascend910-{i}" for i in range(65)), "65 devices, more than 64"),
    ],
)
def test_parse_real_devices_rejects(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_real_devices(value, R910)


@pytest.mark.parametrize(("value", "expected"), [("0", 0), ("123", 123), (TAKEN, 2**64 - 1), ("007", 7)])
def test_parse_predicate_time(value: str, expected: int) -> None:
    assert parse_predicate_time(value) == expected


@pytest.mark.parametrize("value", ["", "-1", "+1", " 1", "1 ", "1.5", "1_000", "0x10", "abc", "18446744073709551616"])
def test_parse_predicate_time_rejects_what_go_parseuint_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="predicate-time"):
        parse_predicate_time(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0-vir02", DynamicRequest((0,), "vir02")),
        ("3-vir05_1c_16g", DynamicRequest((3,), "vir05_1c_16g")),
        ("100-vir16", DynamicRequest((100,), "vir16")),
        ("0,1", DynamicRequest((0, 1))),
        (" 1 , 0 ", DynamicRequest((1, 0))),
        ("7", DynamicRequest((7,))),
    ],
)
def test_parse_npu_core(value: str, expected: DynamicRequest) -> None:
    assert parse_npu_core(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0-vir99", "unknown vNPU template 'vir99'"),
        ("0-2c", "unknown vNPU template '2c'"),
        ("0-vir02-x", "is not <phy>-<template>"),
        ("x-vir02", "'x' is not a phy id"),
        ("-vir02", "'' is not a phy id"),
        ("101-vir02", "'101' is not a phy id"),
        ("01", "'01' is not a phy id"),
        ("0,0", "'0' twice"),
        ("0,,1", "empty item"),
        ("", "empty item"),
        ("Ascend910-0", "'Ascend910' is not a phy id"),
    ],
)
def test_parse_npu_core_rejects(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_npu_core(value)


def test_parse_npu_core_checks_the_template_against_the_family() -> None:
    assert parse_npu_core("0-vir05_1c_16g", family=ChipFamily.ASCEND910B).template == "vir05_1c_16g"
    with pytest.raises(ValueError, match="'vir02' is not allowed on Ascend910B"):
        parse_npu_core("0-vir02", family=ChipFamily.ASCEND910B)


@pytest.mark.parametrize(
    ("request_", "aicore", "cores"),
    [
        (DynamicRequest((0,), "vir04"), 20, 4),
        (DynamicRequest((0,), "vir12_3c_32g"), 24, 12),
        (DynamicRequest((0, 1)), 20, 40),
    ],
)
def test_dynamic_request_core_count(request_: DynamicRequest, aicore: int, cores: int) -> None:
    assert request_.core_count(aicore) == cores
    assert request_.is_vnpu == (request_.template is not None)


def test_the_smallest_predicate_time_wins_and_its_annotated_devices_are_used() -> None:
    pods = [
        pod("a", "Ascend910-0,Ascend910-1", "300"),
        pod("b", "Ascend910-4,Ascend910-5", "200"),
        pod("c", time="250"),
    ]
    choice = pick_pod(pods, RES, 2)
    assert choice.pod is pods[1]
    assert choice.devices == ("Ascend910-4", "Ascend910-5")
    assert choice.rejects == ()


@pytest.mark.parametrize(
    ("skipped", "why"),
    [
        (pod("x", time=TAKEN), "taken"),
        (pod("x", time="018446744073709551615"), "taken, written with a leading zero"),
        (pod("x", "Ascend910-0"), "annotated count differs from the request"),
        (pod("x", phase="Succeeded"), "finished"),
        (pod("x", phase="Failed"), "finished"),
        (pod("x", deleting=True), "being deleted"),
        (pod("x", request=0), "does not request the resource"),
        (pod("x", devices=None), "no annotation"),
        (pod("x", time=TAKEN, devices="garbage"), "taken pods are not parsed at all"),
    ],
)
def test_pods_that_are_skipped_silently(skipped: PodView, why: str) -> None:
    fallback = pod("fallback", time="999")
    choice = pick_pod([skipped, fallback], RES, 2)
    assert choice.pod is fallback, why
    assert choice.rejects == (), why


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (pod("bad", "Ascend910-0,Ascend910-0", "1"), "annotation huawei.com/Ascend910: .*'Ascend910-0' twice"),
        (pod("bad", "Ascend910-0,npu-1", "1"), "'npu-1' is not a Ascend910 chip"),
        (pod("bad", "", "1"), "empty item"),
    ],
)
def test_pods_with_malformed_annotations_are_skipped_and_reported(bad: PodView, reason: str) -> None:
    good = pod("good", time="999")
    choice = pick_pod([bad, good], RES, 2)
    assert choice.pod is good
    assert len(choice.rejects) == 1
    assert choice.rejects[0].pod is bad
    assert re.search(reason, choice.rejects[0].reason), choice.rejects[0].reason


@pytest.mark.parametrize("time", [None, "yesterday", "18446744073709551616", "-1", "1e3"])
def test_a_pod_without_a_readable_predicate_time_is_served_last(time: str | None) -> None:
    """getPredicateTimeFromPodAnnotation: missing or unparsable is the largest time, not a reason to skip."""
    late = pod("late", time=time)
    assert pick_pod([late, pod("timed", time="18446744073709551614")], RES, 2).pod.name == "timed"  # type: ignore[union-attr]
    assert pick_pod([late], RES, 2).pod is late
    assert pick_pod([late], RES, 2).rejects == ()


def test_an_active_pod_of_any_phase_but_finished_is_a_candidate() -> None:
    """FilterPods over GetActivePodListCache: Running (and Unknown) pods count, as Pending ones do."""
    for phase in ("Running", "Unknown"):
        assert pick_pod([pod("x", phase=phase, time="5")], RES, 2).pod is not None, phase


@pytest.mark.parametrize(
    ("candidate", "servable"),
    [
        (pod("x"), True),
        (pod("x", time=None), True),  # served last, but served
        (pod("x", time="018446744073709551615"), True),  # pick_pod itself reads this as taken
        (pod("x", "Ascend910-0"), True),  # for another Allocate's count
        (pod("x", "Ascend910-0,,"), True),  # malformed: chosen never, but reported
        (pod("x", phase="Running"), True),
        (pod("x", phase="Unknown"), True),
        (pod("x", "0-vir04", resource=CORE, request=4), True),
        (pod("x", time=TAKEN), False),
        (pod("x", phase="Succeeded"), False),
        (pod("x", phase="Failed"), False),
        (pod("x", deleting=True), False),
        (pod("x", request=0), False),
        (pod("x", devices=None), False),
        (pod("x", resource="example.com/gpu"), False),
    ],
)
def test_may_serve(candidate: PodView, servable: bool) -> None:
    """The plugin indexes its cache by this rule, so it must keep every pod pick_pod could choose or report."""
    assert may_serve(candidate) is servable


_annotations = st.sampled_from(
    [None, "Ascend910-0,Ascend910-1", "Ascend910-2", "Ascend910-0,,", "0-vir04", "0,1", "garbage"]
)
_times = st.sampled_from([None, "5", "100", TAKEN, "018446744073709551615", "yesterday", "-1"])
_pods = st.builds(
    lambda i, devices, time, resource, request, phase, deleting: pod(
        f"p{i}", devices, time, resource=resource, request=request, phase=phase, deleting=deleting, created=float(i)
    ),
    st.integers(0, 5),
    _annotations,
    _times,
    st.sampled_from([RES, CORE]),
    st.sampled_from([0, 1, 2, 4, 40]),
    st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
    st.booleans(),
)


@given(st.lists(_pods, max_size=8), st.sampled_from([(RES, 1), (RES, 2), (CORE, 4), (CORE, 40)]))
def test_pick_pod_chooses_the_same_among_the_servable_pods_alone(pods: list[PodView], want: tuple[str, int]) -> None:
    resource, count = want
    aicore = 20 if resource == CORE else None
    everything = pick_pod(pods, resource, count, chip_aicore=aicore)
    servable = pick_pod([p for p in pods if may_serve(p)], resource, count, chip_aicore=aicore)
    assert servable == everything


def test_no_pod_gives_an_empty_choice_with_the_rejects() -> None:
    bad = pod("bad", "Ascend910-0,,", "1")
    choice = pick_pod([bad, pod("other", time=TAKEN)], RES, 2)
    assert choice.pod is None
    assert choice.devices == ()
    assert [r.pod for r in choice.rejects] == [bad]
    assert pick_pod([], RES, 2).pod is None


def test_ties_go_to_the_older_pod_then_namespace_and_name() -> None:
    older = pod("z", time="5", created=10.0)
    newer = pod("a", time="5", created=20.0)
    assert pick_pod([newer, older], RES, 2).pod is older
    first = pod("b", time="5", namespace="ns-a")
    second = pod("a", time="5", namespace="ns-b")
    third = pod("c", time="5", namespace="ns-a")
    for order in itertools.permutations([first, second, third]):
        assert pick_pod(order, RES, 2).pod is first


def test_the_choice_does_not_depend_on_the_cache_order() -> None:
    pods = [pod(f"p{i}", time=str(t)) for i, t in enumerate([30, 10, 20, 10])]
    winners = {pick_pod(order, RES, 2).pod for order in itertools.permutations(pods)}
    assert winners == {pods[1]}


def test_npu_core_vnpu_and_whole_chip_requests() -> None:
    vnpu_pod = pod("v", "0-vir04", "1", resource=CORE, request=4)
    chips_pod = pod("c", "0,1", "2", resource=CORE, request=40)
    choice = pick_pod([vnpu_pod, chips_pod], CORE, 4, chip_aicore=20)
    assert choice.pod is vnpu_pod
    assert choice.dynamic == DynamicRequest((0,), "vir04")
    assert choice.devices == ()
    choice = pick_pod([vnpu_pod, chips_pod], CORE, 40, chip_aicore=20)
    assert choice.pod is chips_pod
    assert choice.dynamic == DynamicRequest((0, 1))


def test_npu_core_malformed_annotation_is_reported() -> None:
    bad = pod("bad", "0-vir99", "1", resource=CORE, request=4)
    choice = pick_pod([bad], CORE, 4, chip_aicore=20)
    assert choice.pod is None
    assert "unknown vNPU template 'vir99'" in choice.rejects[0].reason


@pytest.mark.parametrize(
    ("resource", "aicore", "message"),
    [
        (CORE, None, "AI core count"),
        (CORE, 0, "AI core count"),
        ("huawei.com/Ascend910-2c", None, "no Volcano path"),
        ("huawei.com/Ascend910B", None, "no Volcano path"),
        ("nvidia.com/gpu", None, "not a huawei.com resource"),
    ],
)
def test_pick_pod_rejects_resources_without_a_volcano_path(resource: str, aicore: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pick_pod([], resource, 1, chip_aicore=aicore)


KLT, REAL = "huawei.com/kltDev", "huawei.com/AscendReal"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({KLT: "Ascend910-2,Ascend910-3", REAL: "Ascend910-6,Ascend910-7"},
         {"Ascend910-2": "Ascend910-6", "Ascend910-3": "Ascend910-7"}),
        ({KLT: "Ascend910-1", REAL: "Ascend910-1"}, {"Ascend910-1": "Ascend910-1"}),  # the plain path writes both
        ({}, None),  # no allocation of ours on the pod
        ({"other": "x"}, None),
    ],
)  # fmt: skip
def test_kubelet_map_from_the_pods_annotations(annotations: dict[str, str], expected: dict[str, str] | None) -> None:
    assert kubelet_map(annotations, ResourceType.ASCEND910) == expected


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({KLT: "Ascend910-2"}, "come together"),
        ({REAL: "Ascend910-2"}, "come together"),
        ({KLT: "Ascend910-2,Ascend910-3", REAL: "Ascend910-6"}, "names 2 devices"),
        ({KLT: "Ascend910-2", REAL: "GPU-0"}, "not a device id"),
        ({KLT: "Ascend310P-2", REAL: "Ascend910-2"}, "not a Ascend910 chip"),
        ({KLT: "Ascend910-2,,", REAL: "Ascend910-6"}, "empty item"),
    ],
)
def test_kubelet_map_refuses_what_does_not_pair_up(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kubelet_map(annotations, ResourceType.ASCEND910)


# --- the 950's annotated logic ids (ascend-for-volcano SetNPUTopologyToPodFn) -------------------

# logic -> chip name on a node whose logic id i is phy (i + 4) % 8
SHIFTED = {logic: f"npu-{(logic + 4) % 8}" for logic in range(8)}


@pytest.mark.parametrize(
    ("family", "real", "expected"),
    [
        pytest.param(
            ChipFamily.ASCEND950, ["npu-4", "npu-5"], ["npu-0", "npu-1"], id="950: logic ids name their chips"
        ),
        pytest.param(ChipFamily.ASCEND950, ["npu-1", "npu-0"], ["npu-5", "npu-4"], id="950: annotation order kept"),
        pytest.param(ChipFamily.ASCEND950, [], [], id="950: none"),
        pytest.param(ChipFamily.ASCEND910B, ["Ascend910-4"], ["Ascend910-4"], id="910B: the chip names as they are"),
    ],
)
def test_annotated_chips(family: ChipFamily, real: list[str], expected: list[str]) -> None:
    assert annotated_chips(real, family, SHIFTED) == expected


def test_annotated_chips_refuses_a_logic_id_the_node_lacks() -> None:
    with pytest.raises(ValueError, match=r"logic id 8 \(npu-8\)"):
        annotated_chips(["npu-0", "npu-8"], ChipFamily.ASCEND950, SHIFTED)
