"""Which soft-share directories go: a pod's `<ns>.<job>/<phy>_<vid>` once the pod is gone or
finished, its job's directory once no pod of the job holds one.

Pure rules; softshare/dirs.py lists the host directory and removes what these say.
The reference removes a job's directory only when the last pod it remembers of the job is deleted,
and remembers them in memory only: a plugin restart forgets them (its bug 1) and a long-lived
Deployment never frees its dead pods' directories (its bug 2). Ours records in each directory the
uid of the pod it was made for, so the rule holds across restarts; it never trusts what the pod
says of itself (its job label, AscendReal, vnpuId), which whoever may edit the pod can change: a
pod could otherwise keep a dead pod's directory or give up a live one's. Only a directory without
that record (made before the plugin kept one) is matched by the pod's annotations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ascend_common.inuse import ASCEND_REAL
from ascend_common.naming import parse_device_id
from ascend_common.pods import FINISHED_PHASES
from ascend_common.softshare import VNPU_ID, is_soft_share

from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.softshare.pod import is_job_dir, is_pod_dir, job_dir, job_name, pod_dir_name
from ascend_device_plugin.volcano.annotations import atoi

# What the host's npu-info directory holds: each entry's name -> (for a directory) each of its
# entries' names -> whether that entry is a directory. Plain files at the top are not listed.
Listing = Mapping[str, Mapping[str, bool]]


@dataclass(frozen=True, order=True)
class PodDir:
    """A soft-share pod's directory, relative to the npu-info directory: `<job>/<name>`."""

    job: str  # `<namespace>.<job>`
    name: str  # `<phy>_<vid>`

    def __str__(self) -> str:
        return f"{self.job}/{self.name}"


def job_of(pod: PodView) -> str | None:
    """`<namespace>.<job>` of a soft-share pod; None for another pod or one without a job label."""
    if not is_soft_share(pod.annotations):
        return None
    try:
        return job_dir(pod.namespace, job_name(pod.labels))
    except ValueError:
        return None


def pod_dir_of(pod: PodView) -> PodDir | None:
    """The directory the plugin gave a soft-share pod, from what its report wrote on it: the job label,
    the one chip of AscendReal and the vnpuId; None when the pod carries no such report."""
    job = job_of(pod)
    real, vid = pod.annotations.get(ASCEND_REAL), pod.annotations.get(VNPU_ID)
    if job is None or real is None or vid is None:
        return None
    try:
        parsed = parse_device_id(real)
        number = atoi(vid, VNPU_ID)
    except ValueError:
        return None
    if parsed.chip != real or number < 0:
        return None
    return PodDir(job, pod_dir_name(parsed.phy_id, number))


def active(pod: PodView) -> bool:
    """A pod that still holds its directory: not finished (a deleting pod may still run)."""
    return pod.phase not in FINISHED_PHASES


def held_dirs(
    pods: Iterable[PodView], handed_out: Iterable[PodDir], owners: Mapping[PodDir, str | None] | None = None
) -> set[PodDir]:
    """The directories in use: those handed out whose pods' reports may not have reached the cache
    yet (so a pod allocated a moment ago keeps its directory), and those of the active pods. A
    directory's pod is its recorded owner (`owners`: the uid the plugin wrote in it); one without a
    record (`owners` None: none is known) is matched by the pods' annotations."""
    held = set(handed_out)
    pods = list(pods)
    live = {pod.uid for pod in pods if active(pod)}
    recorded = {d for d, uid in (owners or {}).items() if uid is not None}
    held.update(d for d in recorded if owners is not None and owners[d] in live)
    for pod in pods:
        if active(pod) and (found := pod_dir_of(pod)) is not None and found not in recorded:
            held.add(found)
    return held


def removals(listing: Listing, held: Iterable[PodDir]) -> tuple[list[PodDir], list[str]]:
    """What to remove from the npu-info directory: every `<x>.<y>/<phy>_<vid>` directory no one
    holds, then every `<x>.<y>` directory left empty by that. Anything else (a plain file, a
    directory of another shape, a job directory with such a thing in it, a `<x>.<y>` that was
    empty already) is never touched."""
    kept = set(held)
    pods: list[PodDir] = []
    jobs: list[str] = []
    for job in sorted(listing):
        if not is_job_dir(job):
            continue
        stale = [
            PodDir(job, name)
            for name, is_dir in sorted(listing[job].items())
            if is_dir and is_pod_dir(name) and PodDir(job, name) not in kept
        ]
        pods.extend(stale)
        if stale and len(stale) == len(listing[job]):
            jobs.append(job)
    return pods, jobs
