"""What one soft-share pod gets: its quotas, its per-pod directory and quota file, its mounts.

Pure rules; the I/O is softshare/files.py. Reference pkg/server/plugin.go
`extractPodAnnotations`, `buildConfigDirPath`, `writeNPUConfigFile`, `getNPUInfoConfigDirFromPod`,
`mountShareDeviceConfig`; pkg/common/common.go `GetJobNameOfPod`, `ConvertSchedulingPolicyToIntStr`,
`GetNextVirtualIDByPhysicalID` (`collectMatchedVirtualIDs`, `parseVirtualIDFromDirName`,
`calculateNextVirtualID`).

Where we are stricter than the reference (its bugs 3 and 4): every value is checked before anything
is written, and a pod whose file would be missing a line (no job label, an unknown policy, no die
id) is refused instead of running without limits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath

from ascend_common.chip_traits import traits
from ascend_common.chips import ChipFamily
from ascend_common.kubenames import dns1123_label
from ascend_common.softshare import (
    AICORE_QUOTA,
    HBM_QUOTA,
    MAX_AICORE_QUOTA,
    SCHEDULING_POLICIES,
    SCHEDULING_POLICY,
)

# atoi lives with Volcano's candidate rule (volcano.annotations.aicore_quota), which reads the same quota.
from ascend_device_plugin.volcano.annotations import atoi

# The job labels, in the reference's order of preference (`GetJobNameOfPod`).
JOB_LABELS = ("volcano.sh/job-name", "training.kubeflow.org/job-name", "deploy-name")

NPU_INFO_FILE = "npu_info.config"  # api.SoftShareDeviceConfigFileName
SHM_CONTAINER_DIR = "/dev/shm/"  # common.SoftShareDevConfigDirContainerPath
NPU_INFO_CONTAINER_DIR = "/etc/enpu/vcann-rt/"  # common.SoftShareDevNPUInfoConfigDirContainerPath
MAX_VID = 99  # common.maxVnpuID: the highest vid the lowest-free search tries

# A Kubernetes label value, which is what a job name is: it can never be `.`, `..` or hold a `/`,
# but the API server is not the only writer of our cache (a fake one in tests, a bad admission
# webhook), and this name becomes a path component on the host.
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_POD_DIR = re.compile(r"(0|[1-9][0-9]{0,3})_(0|[1-9][0-9]{0,5})")  # `<phy>_<vid>`, as we write it
_JOB_DIR = re.compile(r"[^./][^/]*\.[^/]*")  # `<namespace>.<job>`


@dataclass(frozen=True)
class Quota:
    """A soft-share pod's three annotations, checked."""

    aicore: int  # 1..100, percent of the chip's AI cores
    hbm_mb: int  # >= 1
    policy: int  # 1 fixed-share, 2 elastic, 3 best-effort


def parse_quota(annotations: Mapping[str, str]) -> Quota:
    """The three soft-share annotations; ValueError naming the first that is missing or wrong."""
    missing = [k for k in (AICORE_QUOTA, HBM_QUOTA, SCHEDULING_POLICY) if not annotations.get(k)]
    if missing:
        raise ValueError(f"missing or empty annotations: {', '.join(missing)}")
    aicore = atoi(annotations[AICORE_QUOTA], AICORE_QUOTA)
    if not 1 <= aicore <= MAX_AICORE_QUOTA:
        raise ValueError(f"{AICORE_QUOTA} {aicore} is not in 1..{MAX_AICORE_QUOTA}")
    hbm = atoi(annotations[HBM_QUOTA], HBM_QUOTA)
    if hbm < 1:
        raise ValueError(f"{HBM_QUOTA} {hbm} is not at least 1 (MB)")
    policy = annotations[SCHEDULING_POLICY]
    if policy not in SCHEDULING_POLICIES:
        raise ValueError(f"{SCHEDULING_POLICY} {policy[:40]!r} is not one of {', '.join(SCHEDULING_POLICIES)}")
    return Quota(aicore, hbm, SCHEDULING_POLICIES[policy])


def job_name(labels: Mapping[str, str]) -> str:
    """The first present job label's value (`GetJobNameOfPod`); ValueError when there is none, or
    when it is empty or not a label value (the reference then writes no quota file)."""
    for key in JOB_LABELS:
        if key in labels:
            value = labels[key]
            if not _LABEL_VALUE.fullmatch(value):
                raise ValueError(f"label {key} {value[:70]!r} is not a job name")
            return value
    raise ValueError(f"the pod has none of the job labels {', '.join(JOB_LABELS)}")


def job_dir(namespace: str, job: str) -> str:
    """`<namespace>.<job>`: the name of a job's directory under the npu-info directory."""
    if not dns1123_label(namespace):
        raise ValueError(f"namespace {namespace[:70]!r} is not a DNS label")
    return f"{namespace}.{job}"


def pod_dir_name(phy: int, vid: int) -> str:
    """`<phy>_<vid>`: a pod's directory in its job's (`buildConfigDirPath`, whose `logicID` is the phy id)."""
    return f"{phy}_{vid}"


def vids_of(listing: Mapping[str, Iterable[str]], phy: int) -> list[int]:
    """The vids the host directories `*/<phy>_<n>` use (`collectMatchedVirtualIDs`): `listing` maps
    each directory under the npu-info directory to the names of its subdirectories. A name that is
    not `<a>_<b>` or whose `<b>` Atoi rejects is skipped, as the reference skips it; so is a
    negative vid."""
    wanted = str(phy)
    found: list[int] = []
    for names in listing.values():
        for name in names:
            parts = name.split("_")
            if len(parts) != 2 or parts[0] != wanted:
                continue
            try:
                vid = atoi(parts[1], "vid")
            except ValueError:
                continue
            if vid >= 0:
                found.append(vid)
    return found


def next_vid(vids: Iterable[int]) -> int:
    """The lowest vid in 0..99 not in use, else the highest in use + 1 (`calculateNextVirtualID`)."""
    seen = set(vids)
    for vid in range(MAX_VID + 1):
        if vid not in seen:
            return vid
    return max(seen, default=0) + 1


def npu_info_text(phy: int, vid: int, quota: Quota, shm_id: str) -> str:
    """The `npu_info.config` the runtime (vcann-rt) reads: `key=value` lines joined by `\\n`, no final
    newline, a line with an empty value dropped (`writeNPUConfigFile`)."""
    items = (
        ("physical-npu-id", str(phy)), ("virtual-npu-id", str(vid)), ("aicore-quota", str(quota.aicore)),
        ("memory-quota", str(quota.hbm_mb)), ("shm-id", shm_id), ("scheduling-policy", str(quota.policy)),
    )  # fmt: skip
    return "\n".join(f"{key}={value}" for key, value in items if value)


def shm_id(family: ChipFamily, vdie_id: str | None, ddie_id: str | None) -> str:
    """The die id that names the chip's shared-memory file: the DDIE on the 950, else the VDIE
    (`getDieIDFromPhysicID`); ValueError when the exporter could not read it."""
    kind = traits(family).shm_die
    die = ddie_id if kind == "DDIE" else vdie_id
    if not die:
        raise ValueError(f"the chip's {kind} id is unknown (the exporter could not read it)")
    if "/" in die or die in (".", ".."):
        raise ValueError(f"the chip's {kind} id {die[:60]!r} is not a file name")
    return die


@dataclass(frozen=True)
class MountSpec:
    container_path: str
    host_path: str
    read_only: bool


def shm_host_path(config_dir: PurePath, phy: int, die: str) -> str:
    """`<softShareDevConfigDir>/<phy>/<dieId>`: the chip's shared-memory file on the host."""
    return str(PurePosixPath(config_dir) / str(phy) / die)


def mounts(config_dir: PurePath, phy: int, die: str, pod_dir: PurePath) -> tuple[MountSpec, MountSpec]:
    """The two mounts every container of a soft-share pod gets (`mountShareDeviceConfig`), in its order:
    the chip's shared-memory file read-write, the pod's directory read-only."""
    return (
        MountSpec(str(PurePosixPath(SHM_CONTAINER_DIR) / die), shm_host_path(config_dir, phy, die), False),
        MountSpec(NPU_INFO_CONTAINER_DIR, str(PurePosixPath(pod_dir)), True),
    )


def is_pod_dir(name: str) -> bool:
    """A `<phy>_<vid>` directory name as the plugin writes it."""
    return _POD_DIR.fullmatch(name) is not None


def is_job_dir(name: str) -> bool:
    """A `<namespace>.<job>` directory name."""
    return _JOB_DIR.fullmatch(name) is not None
