"""Which chips pods use, from their annotations (contract section 8): for health, and for the free list and reset."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from ascend_common.inuse import (
    POD_ANNOTATION_MAX_LENGTH,
    VOLCANO_KEYS,
    QuotaUse,
    allocation_share,
    annotation_int,
    chips_in_use_for_allocation,
    chips_in_use_for_health,
    chips_named,
    health_share,
    quota_use,
    volcano_named,
)
from ascend_common.softshare import (
    AICORE_QUOTA,
    HBM_QUOTA,
    SCHEDULING_POLICIES,
    SCHEDULING_POLICY,
    is_soft_share,
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


# ---- soft share ----------------------------------------------------------------------------

# The 30 kubelet ids a soft-share pod gets: anonymous slots, `Ascend910-1-...` whatever its chip.
SLOTS_1 = ",".join(f"Ascend910-1-{i}" for i in range(30))


def soft(phase: str = "Running", real: str | None = "Ascend910-0", klt: str | None = SLOTS_1, **quota: str) -> Pod:
    """A soft-share pod as Volcano and our plugin leave it; quotas 30 / 16384 / elastic unless given."""
    annotations = {AICORE_QUOTA: "30", HBM_QUOTA: "16384", SCHEDULING_POLICY: "elastic"}
    keys = {"aicore": AICORE_QUOTA, "hbm": HBM_QUOTA, "policy": SCHEDULING_POLICY}
    annotations.update({keys[k]: v for k, v in quota.items()})
    if real is not None:
        annotations[REAL] = real
    if klt is not None:
        annotations[KLT] = klt
    return Pod(phase, annotations)


@pytest.mark.parametrize(
    ("pod", "health", "allocation"),
    [
        # The case: kltDev Ascend910-1-0..29 with AscendReal Ascend910-0 holds chip 0, never chip 1.
        (soft(), {"Ascend910-0"}, {"Ascend910-0"}),
        (soft("Pending"), set(), {"Ascend910-0"}),
        (Pod("Pending", {VOLCANO: "Ascend910-0", AICORE_QUOTA: "30", KLT: SLOTS_1}), {"Ascend910-0"}, set()),
        (soft("Succeeded"), set(), set()),
        (soft(real=None), set(), set()),  # before Allocate wrote AscendReal: its slots name nothing
        (soft(policy="gold"), {"Ascend910-0"}, {"Ascend910-0"}),  # its quotas do not count; it still holds
        (soft(real="Ascend910-0,Ascend910-1"), {"Ascend910-0", "Ascend910-1"}, {"Ascend910-0", "Ascend910-1"}),
        # The same ids without the quota annotation are a 310P shared copy: they name chip 1.
        (Pod("Running", {REAL: "Ascend910-0", KLT: SLOTS_1}), {"Ascend910-0", "Ascend910-1"},
         {"Ascend910-0", "Ascend910-1"}),
    ],
)  # fmt: skip
def test_a_soft_share_pod_holds_its_ascend_real_chip_only(pod: Pod, health: set[str], allocation: set[str]) -> None:
    assert allocation_share(pod) == allocation
    assert chips_in_use_for_allocation([pod]) == allocation
    assert health_share(pod) == health


def test_a_soft_share_pod_is_one_with_an_aicore_quota() -> None:
    assert is_soft_share({AICORE_QUOTA: "x"})
    assert not is_soft_share({HBM_QUOTA: "1", SCHEDULING_POLICY: "elastic"})


# Reference pkg/server/manager_test.go TestParseAnnotationIntValue (its desc argument only words
# the error; ours answers None).
@pytest.mark.parametrize(
    ("name", "annotations", "key", "expected"),
    [
        ("TC1 - Annotations is nil", {}, "test-key", None),
        ("TC2 - Annotation key not found", {"other-key": "value"}, "test-key", None),
        ("TC3 - Special key with valid value", {SCHEDULING_POLICY: "fixed-share"}, SCHEDULING_POLICY, 1),
        ("TC4 - Normal key with invalid value", {AICORE_QUOTA: "aa"}, "normal-key", None),
        # Ours: the policy names (common.ConvertSchedulingPolicyToIntStr), and what is no policy.
        ("elastic", {SCHEDULING_POLICY: "elastic"}, SCHEDULING_POLICY, 2),
        ("best-effort", {SCHEDULING_POLICY: "best-effort"}, SCHEDULING_POLICY, 3),
        ("a policy is a name, never its number", {SCHEDULING_POLICY: "1"}, SCHEDULING_POLICY, None),
        ("policy gold", {SCHEDULING_POLICY: "gold"}, SCHEDULING_POLICY, None),
        ("empty policy", {SCHEDULING_POLICY: ""}, SCHEDULING_POLICY, None),
        ("case matters", {SCHEDULING_POLICY: "Elastic"}, SCHEDULING_POLICY, None),
        ("aicore", {AICORE_QUOTA: "30"}, AICORE_QUOTA, 30),
        ("aicore invalid", {AICORE_QUOTA: "aa"}, AICORE_QUOTA, None),
    ],
)
def test_parse_annotation_int_value(name: str, annotations: dict[str, str], key: str, expected: int | None) -> None:
    assert annotation_int(annotations, key) == expected, name


@pytest.mark.parametrize(
    ("pod", "use"),
    [
        (soft(), QuotaUse("Ascend910-0", 30, 16384, 2)),
        (soft(aicore="70", hbm="8192", policy="fixed-share"), QuotaUse("Ascend910-0", 70, 8192, 1)),
        (soft(real="npu-3", klt="npu-3-0", policy="best-effort"), QuotaUse("npu-3", 30, 16384, 3)),
        (soft(aicore="0", hbm="0"), QuotaUse("Ascend910-0", 0, 0, 2)),
        (soft(aicore="150"), QuotaUse("Ascend910-0", 150, 16384, 2)),  # over the chip: summed, fills it
        # The phase is the holder's business (allocation_share), not the quota's.
        (soft("Succeeded"), QuotaUse("Ascend910-0", 30, 16384, 2)),
        # Not summed: a quota or the policy that does not parse, as the reference...
        (soft(policy="gold"), None),
        (soft(aicore="aa"), None),
        (soft(hbm="16G"), None),
        (soft(hbm=" 16384"), None),
        (Pod("Running", {REAL: "Ascend910-0", AICORE_QUOTA: "30", HBM_QUOTA: "16384"}), None),  # no policy
        (Pod("Running", {REAL: "Ascend910-0", AICORE_QUOTA: "30", SCHEDULING_POLICY: "elastic"}), None),  # no HBM
        (soft(real=None), None),  # no AscendReal (calculateCardUsedResourceQuota3's first case)
        # ... and, ours, a negative quota, which would make a full chip look free.
        (soft(aicore="-30"), None),
        (soft(hbm="-1"), None),
        # AscendReal naming no one chip: the reference's whole-value key matches no chip.
        (soft(real="Ascend910-0,Ascend910-1"), None),
        (soft(real=" Ascend910-0"), None),
        (soft(real="Ascend910-1-3"), None),
        (soft(real="Ascend910-01"), None),
        (soft(real="card-0"), None),
    ],
)
def test_quota_use(pod: Pod, use: QuotaUse | None) -> None:
    assert quota_use(pod) == use


# Reference pkg/common/common_test.go TestConvertSchedulingPolicyToIntStr ("" there is no policy, None here).
@pytest.mark.parametrize(
    ("name", "policy", "expected"),
    [
        ("TC001 - Empty input", "", None),
        ("TC002 - Valid input 'fixed-share'", "fixed-share", 1),
        ("TC003 - Valid input 'elastic'", "elastic", 2),
        ("TC004 - Valid input 'best-effort'", "best-effort", 3),
        ("TC005 - Invalid input 'unknown-policy'", "unknown-policy", None),
    ],
)
def test_convert_scheduling_policy_to_int_str(name: str, policy: str, expected: int | None) -> None:
    assert SCHEDULING_POLICIES.get(policy) == expected, name
