"""What one soft-share pod gets (issue 23): quotas, job name, vid, quota file, die id, mounts; and
which directories the cleanup removes. Table tests of the pure rules (softshare/pod.py,
softshare/cleanup.py), ported from the reference's Go tests where one exists (named after it:
pkg/server/plugin_test.go, pkg/common/common_test.go) and the issue's "Must show" vectors word
for word.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath

import pytest
from ascend_common.chips import ChipFamily
from ascend_common.inuse import ASCEND_REAL, KLT_DEV
from ascend_common.softshare import AICORE_QUOTA, HBM_QUOTA, SCHEDULING_POLICY, VNPU_ID
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.softshare.cleanup import PodDir, held_dirs, job_of, pod_dir_of, removals
from ascend_device_plugin.softshare.pod import (
    Quota,
    is_job_dir,
    is_pod_dir,
    job_dir,
    job_name,
    mounts,
    next_vid,
    npu_info_text,
    parse_quota,
    pod_dir_name,
    shm_id,
    vids_of,
)
from ascend_device_plugin.volcano.annotations import atoi

DIE = "00000001-0000ABCD-00000000-00000000-00000012"  # the die words [0x1,0xABCD,0,0,0x12]
QUOTAS = {AICORE_QUOTA: "30", HBM_QUOTA: "16384", SCHEDULING_POLICY: "elastic"}


# ---- the Allocate vector -----------------------------------------------------------------


def test_must_show_allocate_file_and_mounts() -> None:
    # pod default/p1, label volcano.sh/job-name=job1, quotas 30 / 16384 / elastic, chip Ascend910-0,
    # no directory yet: /etc/enpu/default.job1/0_0/npu_info.config, exactly.
    quota = parse_quota(QUOTAS)
    job = job_dir("default", job_name({"volcano.sh/job-name": "job1"}))
    vid = next_vid(vids_of({}, 0))
    pod_dir = PurePosixPath("/etc/enpu") / job / pod_dir_name(0, vid)
    assert str(pod_dir) == "/etc/enpu/default.job1/0_0"
    assert npu_info_text(0, vid, quota, shm_id(ChipFamily.ASCEND910B, DIE, None)) == (
        "physical-npu-id=0\nvirtual-npu-id=0\naicore-quota=30\nmemory-quota=16384\n"
        "shm-id=00000001-0000ABCD-00000000-00000000-00000012\nscheduling-policy=2"
    )
    shm, info = mounts(PurePosixPath("/var/lib/ss"), 0, DIE, pod_dir)
    assert (shm.container_path, shm.host_path, shm.read_only) == (f"/dev/shm/{DIE}", f"/var/lib/ss/0/{DIE}", False)
    assert (info.container_path, info.host_path, info.read_only) == ("/etc/enpu/vcann-rt/", str(pod_dir), True)


@pytest.mark.parametrize(
    ("listing", "phy", "vid"),
    [
        ({"default.job1": ["0_0"]}, 0, 1),  # job2, chip 0 -> 0_1 (vids are per chip across jobs)
        ({"default.job1": ["0_0", "0_1"], "default.job2": ["0_3"]}, 0, 2),  # 0_0, 0_1, 0_3 taken -> 0_2
        ({"default.job1": ["0_0", "0_1"]}, 1, 0),  # chip 1 -> 1_0
    ],
)
def test_must_show_vids(listing: Mapping[str, list[str]], phy: int, vid: int) -> None:
    assert next_vid(vids_of(listing, phy)) == vid


def test_must_show_job_label_order() -> None:
    assert job_name({"deploy-name": "d", "training.kubeflow.org/job-name": "t"}) == "t"


def test_must_show_refusals() -> None:
    with pytest.raises(ValueError, match="none of the job labels"):  # no job label -> refused
        job_name({})
    with pytest.raises(ValueError, match="'gold' is not one of"):  # policy gold -> refused
        parse_quota({**QUOTAS, SCHEDULING_POLICY: "gold"})


# ---- TestGetJobNameOfPod (pkg/common/common_test.go) ---------------------------------------------


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"volcano.sh/job-name": "job1"}, "job1"),  # ResetTaskNameKey (highest priority)
        ({"training.kubeflow.org/job-name": "job1"}, "job1"),  # ResetTaskNameKeyInLabel (second)
        ({"deploy-name": "job1"}, "job1"),  # DeploymentNameKeyInLabel (lowest)
        # multiple target labels exist: the priority rule
        ({"volcano.sh/job-name": "job1", "training.kubeflow.org/job-name": "other-job", "deploy-name": "other-job2"},
         "job1"),
    ],
)  # fmt: skip
def test_get_job_name_of_pod(labels: dict[str, str], expected: str) -> None:
    assert job_name(labels) == expected


@pytest.mark.parametrize(
    "labels",
    [
        {"other-label": "val"},  # Go: no target labels -> "" (ours: an error, the pod is refused)
        {},  # Go: empty label map -> ""
        {"volcano.sh/job-name": ""},  # ours: the first present label is empty
        {"volcano.sh/job-name": "../x"},  # ours: not a label value, never a path
        {"volcano.sh/job-name": ".."},
    ],
)
def test_get_job_name_of_pod_refuses(labels: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="job"):
        job_name(labels)


# ---- TestBuildConfigDirPath (pkg/server/plugin_test.go) ------------------------------------------


def test_build_config_dir_path() -> None:
    # "all parameters valid, return correct path" (the Go test's `logicID` is the phy id)
    assert f"/etc/enpu/{job_dir('default', 'test-job')}/{pod_dir_name(0, 1)}" == "/etc/enpu/default.test-job/0_1"


@pytest.mark.parametrize("namespace", ["", "Default", "a/b", ".."])
def test_build_config_dir_path_refuses_a_bad_namespace(namespace: str) -> None:
    # Go: a nil pod or an empty job name gives "" (no file); ours refuses a namespace that is not a DNS label.
    with pytest.raises(ValueError, match="namespace"):
        job_dir(namespace, "test-job")


# ---- TestWriteNPUConfigFile ----------------------------------------------------------------------


def test_write_npu_config_file() -> None:
    # "all config items non-empty": six lines, `\n`-joined, no final newline
    assert npu_info_text(0, 1, Quota(50, 2048, 2), "die-001") == (
        "physical-npu-id=0\nvirtual-npu-id=1\naicore-quota=50\nmemory-quota=2048\nshm-id=die-001\nscheduling-policy=2"
    )


def test_write_npu_config_file_skips_empty_values() -> None:
    # "partial config items empty, skip empty and write valid": ours can only have an empty shm id
    # (shm_id refuses one before any file is written, so this is the text rule alone).
    assert "shm-id" not in npu_info_text(0, 1, Quota(50, 2048, 2), "")
    assert not npu_info_text(0, 1, Quota(50, 2048, 2), "").endswith("\n")


# ---- TestExtractPodAnnotations and ConvertSchedulingPolicyToIntStr -------------------------------


@pytest.mark.parametrize(
    ("policy", "number"), [("fixed-share", 1), ("elastic", 2), ("best-effort", 3)]
)  # fmt: skip
def test_convert_scheduling_policy_to_int_str(policy: str, number: int) -> None:
    assert parse_quota({**QUOTAS, SCHEDULING_POLICY: policy}).policy == number


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({}, "missing or empty annotations"),  # pod has no annotations
        ({**QUOTAS, SCHEDULING_POLICY: ""}, "missing or empty annotations: huawei.com/scheduler.softShareDev.policy"),
        (
            {AICORE_QUOTA: "30", SCHEDULING_POLICY: "elastic"},
            "missing or empty annotations: huawei.com/scheduler.softShareDev.hbm",
        ),
        # ours (the reference's bug 4): values are checked
        ({**QUOTAS, SCHEDULING_POLICY: "gold"}, "is not one of fixed-share, elastic, best-effort"),
        ({**QUOTAS, AICORE_QUOTA: "0"}, "aicoreQuota 0 is not in 1..100"),
        ({**QUOTAS, AICORE_QUOTA: "101"}, "aicoreQuota 101 is not in 1..100"),
        ({**QUOTAS, AICORE_QUOTA: "3O"}, "is not an integer"),
        ({**QUOTAS, HBM_QUOTA: "0"}, "hbmQuota 0 is not at least 1"),
        ({**QUOTAS, HBM_QUOTA: "16GB"}, "is not an integer"),
        ({**QUOTAS, HBM_QUOTA: "99999999999999999999"}, "out of the int range"),
    ],
)
def test_extract_pod_annotations_refuses(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        parse_quota(annotations)


def test_extract_pod_annotations_takes_what_atoi_takes() -> None:
    # Go's Atoi takes a sign and leading zeros; the file gets the number in its canonical form.
    assert parse_quota({**QUOTAS, AICORE_QUOTA: "+030"}) == Quota(30, 16384, 2)


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0), ("-7", -7), ("+7", 7), ("007", 7), ("9223372036854775807", 2**63 - 1)]
)  # fmt: skip
def test_atoi_is_go_atoi(text: str, value: int) -> None:
    assert atoi(text, "x") == value


@pytest.mark.parametrize("text", ["", " 7", "7\n", "1e3", "٣", "9223372036854775808", "0x10"])
def test_atoi_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=r"^x "):
        atoi(text, "x")


# ---- TestGetNextVirtualIDByPhysicalID and its parts ----------------------------------------------


def test_calculate_next_virtual_id() -> None:
    assert next_vid([]) == 0  # "When virtualIDs is empty"
    assert next_vid([1, 5, 3]) == 0  # "When virtualIDs has multiple elements"
    assert next_vid(range(100)) == 100  # every one of 0..99 taken: max + 1
    assert next_vid([*range(100), 150]) == 151


def test_parse_virtual_id_from_dir_name() -> None:
    # "invalid dir name format" (100), "PhysicalID not match" (200_5) are skipped; "0_1" gives 1
    assert vids_of({"ns.job": ["100", "200_5", "0_1"]}, 0) == [1]


def test_collect_matched_virtual_ids_skips_what_the_reference_skips() -> None:
    listing = {"a.b": ["0_x", "0_-1", "0_1_2", "0_07", "1_4"], "c.d": ["0_2"], "e": ["0_3"]}
    # `0_07`: Atoi takes it (7); every top directory counts, whatever its name.
    assert sorted(vids_of(listing, 0)) == [2, 3, 7]


# ---- die id and mounts (mountShareDeviceConfig) --------------------------------------------------


@pytest.mark.parametrize(
    ("family", "vdie", "ddie", "expected"),
    [
        (ChipFamily.ASCEND910B, "V", "D", "V"),
        (ChipFamily.ASCEND910A3, "V", None, "V"),
        (ChipFamily.ASCEND950, "V", "D", "D"),  # the 950 (resource `npu`): the DDIE
    ],
)
def test_die_id_choice(family: ChipFamily, vdie: str | None, ddie: str | None, expected: str) -> None:
    assert shm_id(family, vdie, ddie) == expected


@pytest.mark.parametrize(
    ("family", "vdie", "ddie"),
    [(ChipFamily.ASCEND910B, None, "D"), (ChipFamily.ASCEND950, "V", None), (ChipFamily.ASCEND910B, "a/b", None)],
)
def test_die_id_unknown_is_refused(family: ChipFamily, vdie: str | None, ddie: str | None) -> None:
    # Reference: a die id read failure gives no quota file and no mounts, and the pod runs (bug 3).
    with pytest.raises(ValueError, match="id"):
        shm_id(family, vdie, ddie)


# ---- cleanup: a pod's directory from the pod, and what goes ----------------------------------------


def pod(
    name: str, annotations: Mapping[str, str], *, phase: str = "Running", labels: Mapping[str, str] | None = None
) -> PodView:
    return PodView(
        namespace="default", name=name, uid=f"uid-{name}", phase=phase, annotations=annotations, requests={},
        labels={"volcano.sh/job-name": "job1"} if labels is None else labels,
    )  # fmt: skip


REPORTED = {**QUOTAS, ASCEND_REAL: "Ascend910-0", KLT_DEV: "Ascend910-1-0,Ascend910-1-1", VNPU_ID: "0"}


def test_pod_dir_of_reads_the_report() -> None:
    assert pod_dir_of(pod("a", REPORTED)) == PodDir("default.job1", "0_0")
    assert pod_dir_of(pod("b", {**REPORTED, VNPU_ID: "1"})) == PodDir("default.job1", "0_1")
    assert job_of(pod("c", QUOTAS)) == "default.job1"


@pytest.mark.parametrize(
    ("annotations", "labels"),
    [
        ({k: v for k, v in REPORTED.items() if k != AICORE_QUOTA}, None),  # not a soft-share pod
        ({k: v for k, v in REPORTED.items() if k != VNPU_ID}, None),  # report not in yet
        ({**REPORTED, ASCEND_REAL: "Ascend910-0,Ascend910-1"}, None),
        ({**REPORTED, VNPU_ID: "x"}, None),
        (REPORTED, {}),  # no job label
    ],
)
def test_pod_dir_of_none(annotations: dict[str, str], labels: dict[str, str] | None) -> None:
    assert pod_dir_of(pod("a", annotations, labels=labels)) is None


def test_held_dirs_are_the_active_pods_and_the_handed_out() -> None:
    pods = [pod("a", REPORTED), pod("b", {**REPORTED, VNPU_ID: "1"}, phase="Succeeded")]
    assert held_dirs(pods, [PodDir("default.job2", "1_0")]) == {PodDir("default.job1", "0_0"),
                                                               PodDir("default.job2", "1_0")}  # fmt: skip


@pytest.mark.parametrize(
    ("case", "owners", "held"),
    [
        # a (running) edited its vnpuId from 0 to 1, the dir of b, which is gone: the record decides.
        ("both recorded", {"0_0": "uid-a", "0_1": "uid-b"}, {"0_0"}),
        # Neither dir has a record (made before the plugin kept one): the annotation decides, as before.
        ("none recorded", {"0_0": None, "0_1": None}, {"0_1"}),
        # b's dir is recorded: a's annotation cannot keep it; a's own has no record and no annotation.
        ("only b's recorded", {"0_0": None, "0_1": "uid-b"}, set()),
    ],
)
def test_held_dirs_follow_the_plugins_record_not_the_pods_annotation(
    case: str, owners: dict[str, str | None], held: set[str]
) -> None:
    edited = pod("a", {**REPORTED, VNPU_ID: "1"})
    recorded = {PodDir("default.job1", name): uid for name, uid in owners.items()}
    assert held_dirs([edited], [], recorded) == {PodDir("default.job1", name) for name in held}, case


def test_removals_a_then_b() -> None:
    # Pods A (0_0) and B (0_1) of default.job1: deleting A removes 0_0 only; deleting B the job dir.
    listing = {"default.job1": {"0_0": True, "0_1": True}}
    b = PodDir("default.job1", "0_1")
    assert removals(listing, {b}) == ([PodDir("default.job1", "0_0")], [])
    assert removals({"default.job1": {"0_1": True}}, set()) == ([b], ["default.job1"])


def test_removals_the_start_sweep() -> None:
    # A stale /etc/enpu/default.old/0_5 goes; a file /etc/enpu/README is never listed (plain files at
    # the top are not); a directory of another shape, or a job dir holding a stranger, stays.
    listing = {
        "default.old": {"0_5": True},
        "default.job1": {"0_0": True},
        "vcann-rt": {"0_1": True},  # not `<x>.<y>`
        "ns.keep": {"0_2": True, "notes.txt": False, "0_3": False},  # a file, and a file named like a dir
        "ns.empty": {},  # not made empty by the sweep: not ours to judge
    }
    assert removals(listing, {PodDir("default.job1", "0_0")}) == (
        [PodDir("default.old", "0_5"), PodDir("ns.keep", "0_2")],
        ["default.old"],
    )


@pytest.mark.parametrize(("name", "ok"), [("0_5", True), ("15_123", True), ("0_05", False), ("a_1", False),
                                           ("0_1_2", False), ("0", False)])  # fmt: skip
def test_is_pod_dir(name: str, ok: bool) -> None:
    assert is_pod_dir(name) is ok


@pytest.mark.parametrize(("name", "ok"), [("default.job1", True), ("a.b.c", True), ("vcann-rt", False),
                                           (".hidden", False)])  # fmt: skip
def test_is_job_dir(name: str, ok: bool) -> None:
    assert is_job_dir(name) is ok
