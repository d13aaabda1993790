"""Which chips pods use, from their annotations (contract section 8): for health, and for the free list and reset."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from ascend_common.inuse import (
    POD_ANNOTATION_MAX_LENGTH,
    VOLCANO_KEYS,
    allocation_share,
    chips_in_use_for_allocation,
    chips_in_use_for_health,
    chips_named,
    health_share,
    volcano_named,
)

VOLCANO = "huawei.com/Ascend910"
VOLCANO_A5 = "huawei.com/npu"
REAL = "huawei.com/AscendReal"
KLT = "huawei.com/kltDev"


@dataclass(frozen=True)
class Pod:
    phase: str
    annotations: dict[str, str] = field(default_factory=dict)


@pytest.mark.parametrize(
    ("value", "chips"),
    [
        ("Ascend910-0,Ascend910-3", {"Ascend910-0", "Ascend910-3"}),
        ("Ascend910-5c.1cpu.16g-100-2_0", {"Ascend910-2"}),  # a dynamic vNPU with its vfg id
        ("Ascend910-2c-101-6", {"Ascend910-6"}),
        ("Ascend310P-1-2", {"Ascend310P-1"}),  # a shared copy
        ("npu-core-4,npu-core-5", set()),
        (" Ascend910-1 , ,junk,GPU-0", {"Ascend910-1"}),
        ("", set()),
    ],
)
def test_chips_named(value: str, chips: set[str]) -> None:
    assert chips_named(value) == chips


def test_the_volcano_keys_are_the_reference_annotation_of_both_generations() -> None:
    assert VOLCANO_KEYS == (VOLCANO, VOLCANO_A5)


@pytest.mark.parametrize(
    ("value", "chips"),
    [
        ("Ascend910-0,Ascend910-3", {"Ascend910-0", "Ascend910-3"}),
        ("npu-7", {"npu-7"}),
        # The reference compares each entry as it is with the device name: only exact names count.
        (" Ascend910-1,Ascend910-2 ", set()),
        ("Ascend910-01", set()),
        ("Ascend910-2c-101-6,Ascend910-6-1,Ascend910-5_0", set()),  # a vNPU, a shared copy: not the chip
        ("Ascend910-6,,GPU-1", {"Ascend910-6"}),
        ("", set()),
        ("Ascend910-0" + "," * (POD_ANNOTATION_MAX_LENGTH - 11), {"Ascend910-0"}),  # 1 MiB exactly
        ("Ascend910-0" + "," * (POD_ANNOTATION_MAX_LENGTH - 10), set()),  # over 1 MiB: skipped whole
    ],
)
def test_volcano_named(value: str, chips: set[str]) -> None:
    assert volcano_named(value) == chips


def test_the_length_limit_counts_bytes_as_go_does() -> None:
    entries = "Ascend910-0,"
    fill = "é" * ((POD_ANNOTATION_MAX_LENGTH - len(entries)) // 2)  # 2 bytes each, 1 character
    assert volcano_named(entries + fill) == {"Ascend910-0"}
    assert volcano_named(entries + fill + "é") == set()


# Reference pkg/device/ascendcommon_test.go TestNpuIsUsedNow. Its pods carry no phase (the mocked
# active pod list returns them as they are): an empty phase is active. Its device names are
# `device1`..; ours must be chip names, so device<n> is Ascend910-<n>.
NPU_IS_USED_NOW_PODS = [
    Pod("", {VOLCANO: ""}),  # mock pod1
    Pod("", {VOLCANO: "Ascend910-1,Ascend910-2"}),  # mock pod2
]


@pytest.mark.parametrize(
    ("case", "device", "used"),
    [
        ("01-device exist, should return true", "Ascend910-1", True),
        ("02-device not exist, should return false", "Ascend910-3", False),
    ],
)
def test_npu_is_used_now(case: str, device: str, used: bool) -> None:
    assert (device in chips_in_use_for_health(NPU_IS_USED_NOW_PODS)) is used, case


@pytest.mark.parametrize(
    ("pod", "health", "allocation"),
    [
        # A pod Volcano bound, not yet allocated: in use for health only, in any active phase.
        (Pod("Pending", {VOLCANO: "Ascend910-0,Ascend910-1"}), {"Ascend910-0", "Ascend910-1"}, set()),
        (Pod("Running", {VOLCANO: "Ascend910-0"}), {"Ascend910-0"}, set()),
        (Pod("Unknown", {VOLCANO: "Ascend910-0"}), {"Ascend910-0"}, set()),
        (Pod("", {VOLCANO: "Ascend910-0"}), {"Ascend910-0"}, set()),
        (Pod("Succeeded", {VOLCANO: "Ascend910-0"}), set(), set()),
        (Pod("Failed", {VOLCANO: "Ascend910-0"}), set(), set()),
        (Pod("Pending", {VOLCANO_A5: "npu-3"}), {"npu-3"}, set()),
        # Allocated on the plain path: health counts it once Running, the free list from Pending.
        (Pod("Pending", {REAL: "Ascend910-2", KLT: "Ascend910-2"}), set(), {"Ascend910-2"}),
        (Pod("Running", {REAL: "Ascend910-2", KLT: "Ascend910-2"}), {"Ascend910-2"}, {"Ascend910-2"}),
        (Pod("Running", {KLT: "Ascend910-2c-100-5"}), {"Ascend910-5"}, {"Ascend910-5"}),  # a static vNPU: kltDev only
        (Pod("Succeeded", {REAL: "Ascend910-2"}), set(), set()),
        # Allocated through Volcano: the real chip (AscendReal) and the kubelet's (kltDev) both count.
        (
            Pod("Running", {VOLCANO: "Ascend910-6", REAL: "Ascend910-6", KLT: "Ascend910-2"}),
            {"Ascend910-6", "Ascend910-2"},
            {"Ascend910-6", "Ascend910-2"},
        ),
        (
            Pod("Pending", {VOLCANO: "Ascend910-6", REAL: "Ascend910-6", KLT: "Ascend910-2"}),
            {"Ascend910-6"},
            {"Ascend910-6", "Ascend910-2"},
        ),
        # Another resource's annotation names no chip for health.
        (Pod("Pending", {"huawei.com/Ascend310P": "Ascend310P-0"}), set(), set()),
        (Pod("Running", {"other": "Ascend910-3"}), set(), set()),
    ],
)
def test_one_pod(pod: Pod, health: set[str], allocation: set[str]) -> None:
    assert health_share(pod) == health
    assert chips_in_use_for_health([pod]) == health
    assert allocation_share(pod) == allocation
    assert chips_in_use_for_allocation([pod]) == allocation


def test_health_reads_only_the_keys_asked_for() -> None:
    pods = [Pod("Pending", {VOLCANO: "Ascend910-0"}), Pod("Pending", {VOLCANO_A5: "npu-1"})]
    assert chips_in_use_for_health(pods, (VOLCANO_A5,)) == {"npu-1"}
    assert chips_in_use_for_health(pods, ()) == set()


def test_chips_in_use_counts_pending_and_running_pods_only() -> None:
    pods = [
        Pod("Running", {REAL: "Ascend910-0"}),
        Pod("Pending", {KLT: "Ascend910-1"}),
        Pod("Succeeded", {REAL: "Ascend910-2"}),
        Pod("Running", {"other": "Ascend910-3"}),
        Pod("Pending", {VOLCANO: "Ascend910-4"}),  # bound, not allocated: the free list still has it
    ]
    assert chips_in_use_for_allocation(pods) == {"Ascend910-0", "Ascend910-1"}
    assert chips_in_use_for_allocation(pods, phases=("Running",)) == {"Ascend910-0"}
    assert chips_in_use_for_health(pods) == {"Ascend910-0", "Ascend910-4"}
