"""Drill: soft share (Volcano's chip1softsharedev) on a simulated 910B node and a 950 node: three
pods Volcano packed on one chip by AI-core quota, each with its own `npu_info.config` and the
chip's shared-memory file, the chip kept in the ConfigMap's free list until the quotas reach
100, and each pod's files removed with it (issue 23).

The kubelet asks for as many anonymous ids as the pod's aicoreQuota and takes them all from one
other chip's range (`<name>-<other>-0..99`): they say nothing about the chip, which is the pod's
annotation alone, so that other chip stays free throughout.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.stack import Stack, node_stack
from tests.support.exporter import ExporterProc
from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import until

NS = "ml"
TAKEN = "18446744073709551615"
QUOTA = "huawei.com/scheduler.softShareDev.aicoreQuota"
HBM_QUOTA = "huawei.com/scheduler.softShareDev.hbmQuota"
POLICY = "huawei.com/scheduler.softShareDev.policy"
VNPU_ID = "huawei.com/scheduler.softShareDev.vnpuId"
REAL = "huawei.com/AscendReal"
KLT = "huawei.com/kltDev"
NPU_INFO_IN_CONTAINER = "/etc/enpu/vcann-rt/"  # the reference's SoftShareDevNPUInfoConfigDirContainerPath
SCHEDULING_POLICY = {"fixed-share": 1, "elastic": 2, "best-effort": 3}


@dataclass(frozen=True)
class Node:
    profile: str
    resource: str
    die: str  # the exporter's ChipStatic field the shm id comes from


NODES = {
    "910b": Node("910b-8", "huawei.com/Ascend910", "vdie_id"),
    "950": Node("a5-superpod-8", "huawei.com/npu", "ddie_id"),  # the 950's shm id is its DDIE
}


@dataclass(frozen=True)
class SharePod:
    name: str
    labels: dict[str, str]
    aicore: int
    hbm: int
    policy: str
    job_dir: str  # <namespace>.<job>
    vid: int


# Two pods of one Volcano job and a third of a Kubeflow job (its deploy-name label loses to the
# Kubeflow one, as common.GetJobNameOfPod orders them); quotas 30 + 40 + 30 = 100.
PODS = (
    SharePod("p1", {"volcano.sh/job-name": "job1"}, 30, 4096, "fixed-share", f"{NS}.job1", 0),
    SharePod("p2", {"volcano.sh/job-name": "job1"}, 40, 8192, "elastic", f"{NS}.job1", 1),
    SharePod(
        "p3", {"deploy-name": "d", "training.kubeflow.org/job-name": "job2"}, 30, 2048, "best-effort", f"{NS}.job2", 2
    ),
)


def phy(chip: str) -> int:
    return int(chip.rsplit("-", 1)[1])


def pod_annotations(api: FakeApiServer, name: str) -> dict[str, str]:
    pod = api.get_object("pods", name, NS)
    return dict(pod["metadata"].get("annotations") or {}) if pod else {}


def reported(api: FakeApiServer, name: str) -> Callable[[], dict[str, str] | None]:
    """The pod's annotations once the plugin's allocation report (AscendReal) is on it."""
    return lambda: a if REAL in (a := pod_annotations(api, name)) else None


def npu_info(chip: int, vid: int, pod: SharePod, die: str) -> str:
    return "\n".join(
        [
            f"physical-npu-id={chip}",
            f"virtual-npu-id={vid}",
            f"aicore-quota={pod.aicore}",
            f"memory-quota={pod.hbm}",
            f"shm-id={die}",
            f"scheduling-policy={SCHEDULING_POLICY[pod.policy]}",
        ]
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def free(s: Stack, resource: str) -> set[str]:
    info = s.device_info(resource)
    return info.healthy if info else set()


@pytest.mark.parametrize("kind", list(NODES))
async def test_three_pods_share_a_chip_by_quota_and_leave_nothing_behind(kind: str, tmp_path: Path) -> None:
    node = NODES[kind]
    enpu = tmp_path / "enpu"  # /etc/enpu on a node (the DaemonSet's DirectoryOrCreate makes it)
    enpu.mkdir()
    shm_dir = tmp_path / "share_device"  # the plugin makes it, as the reference does
    chip = ""
    other = ""  # the chip whose anonymous ids the kubelet hands out
    busy = ""  # the chip of a whole-chip pod, started to know the fault-manager has seen the pods
    die = ""
    # What Volcano annotates and the runtime is told: on the 950 the chip's logic id (its soft-share
    # policy maps the chosen phy id to baseDeviceInfos' DeviceID, as every 950 policy), else the chip.
    annotated, visible = "", ""

    async def schedule(api: FakeApiServer, exporter: ExporterProc) -> None:
        nonlocal chip, other, busy, die, annotated, visible
        async with exporter.client() as client:
            chips = sorted((await client.get("/v1/chips")).json()["chips"], key=lambda c: c["phy_id"])
        shared = chips[1]
        chip, other, busy = shared["name"], chips[2]["name"], chips[3]["name"]
        a5 = node.resource == "huawei.com/npu"
        annotated = f"npu-{shared['logic_id']}" if a5 else chip
        visible = str(shared["logic_id"] if a5 else shared["phy_id"])
        die = shared["static"][node.die]
        assert die, f"the sim's {node.die} of {chip}"
        for i, p in enumerate(PODS):
            api.add_pod(
                p.name, NS, phase="Pending", labels=p.labels, requests={node.resource: p.aicore},
                annotations={
                    node.resource: annotated, "predicate-time": str(1000 + i),
                    QUOTA: str(p.aicore), HBM_QUOTA: str(p.hbm), POLICY: p.policy,
                },
            )  # fmt: skip

    plugin_args = (
        "--volcano-type", "--share-dev-count", "100",
        "--soft-share-dev-config-dir", str(shm_dir), "--soft-share-npu-info-dir", str(enpu),
    )  # fmt: skip
    async with node_stack(
        profile=node.profile, resource=node.resource, plugin_args=plugin_args, prepare=schedule,
        every_chip_listed=False,
    ) as s:  # fmt: skip
        # Every chip as 100 anonymous ids <name>-<phy>-0..99.
        ids = {f"{name}-{n}" for name in s.names.values() for n in range(100)}
        await s.kubelet.wait_for(node.resource, lambda m: set(m.devices) == ids, timeout=10)
        assert chip in free(s, node.resource)

        shm_host = shm_dir / str(phy(chip)) / die
        first = 0
        for p in PODS:
            kubelet_ids = [f"{other}-{n}" for n in range(first, first + p.aicore)]
            first += p.aicore
            resp = await s.kubelet.allocate(node.resource, [kubelet_ids])
            (container,) = resp.container_responses
            assert dict(container.envs)["ASCEND_VISIBLE_DEVICES"] == visible, p.name
            pod_dir = enpu / p.job_dir / f"{phy(chip)}_{p.vid}"
            assert {(m.container_path, m.host_path, m.read_only) for m in container.mounts} == {
                (f"/dev/shm/{die}", str(shm_host), False),
                (NPU_INFO_IN_CONTAINER, str(pod_dir), True),
            }, p.name
            # Written before the answer: the runtime mounts them as the container starts.
            assert (pod_dir / "npu_info.config").read_text() == npu_info(phy(chip), p.vid, p, die)
            assert (mode(pod_dir / "npu_info.config"), mode(pod_dir), mode(pod_dir.parent)) == (0o644, 0o755, 0o755)
            assert shm_host.is_file() and shm_host.stat().st_size == 0 and mode(shm_host) == 0o666
            assert pod_annotations(s.api, p.name)["predicate-time"] == TAKEN

            ann = await until(reported(s.api, p.name), 15, f"the allocation report of {p.name}")
            assert (ann[REAL], ann[KLT], ann[VNPU_ID]) == (chip, ",".join(sorted(kubelet_ids)), str(p.vid)), p.name
            s.api.modify("pods", p.name, NS, lambda pod: pod["status"].update(phase="Running"))

            if p.name == "p2":
                # 30 + 40 AI cores: the chip stays free. A whole-chip pod started after them leaves the
                # list first, so the fault-manager has seen both when the chip is looked at.
                s.api.add_pod("whole", NS, requests={node.resource: 1}, annotations={REAL: busy})
                await until(lambda: busy not in free(s, node.resource), 10, f"{busy} used by the whole-chip pod")
                assert {chip, other} <= free(s, node.resource)

        # 100 AI cores: the chip leaves the list; the chip behind the kubelet's ids never did.
        await until(lambda: chip not in free(s, node.resource), 10, f"{chip} full at 100 AI cores")
        assert other in free(s, node.resource)
        assert sorted(str(d.relative_to(enpu)) for d in enpu.glob("*/*")) == [
            f"{NS}.job1/{phy(chip)}_0",
            f"{NS}.job1/{phy(chip)}_1",
            f"{NS}.job2/{phy(chip)}_2",
        ]

        # The last pod of job2 goes: its job dir with it, and the chip is free again.
        s.api.remove("pods", "p3", NS)
        await until(lambda: not (enpu / f"{NS}.job2").exists(), 10, "the job2 dir removed")
        await until(lambda: chip in free(s, node.resource), 10, f"{chip} free again at 70 AI cores")
        # One pod of job1 goes: its own dir only (the reference keeps it until the job's last pod).
        s.api.remove("pods", "p1", NS)
        await until(lambda: not (enpu / f"{NS}.job1" / f"{phy(chip)}_0").exists(), 10, "p1's dir removed")
        assert (enpu / f"{NS}.job1" / f"{phy(chip)}_1" / "npu_info.config").is_file(), "p2's dir stays"
        s.api.remove("pods", "p2", NS)
        await until(lambda: not (enpu / f"{NS}.job1").exists(), 10, "the job1 dir removed")
        assert list(enpu.iterdir()) == []
        assert shm_host.is_file(), "the chip's shared-memory file outlives its pods (the reference's)"
