"""`--kubelet-api both` (issue 33 item 7): an Allocate on the device-plugin path and a claim's
Prepare for the same chip, raced 200 times from two kubelets (the fake device-plugin kubelet and
the fake DRA kubelet, in this process) against one plugin process: exactly one of them is granted
every time, and the chip is free again after each round's cleanup.

Before the chip table (allocation.chip_owners), the slice kept offering a chip the device plugin had just
handed out until the pod's annotation reached the cache, and Allocate never looked at claims: both
were granted whenever Allocate came first.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from functools import partial
from pathlib import Path

import grpc

from tests.plugin.test_dra_process import dra_args, kubelet_for, put_claim, slice_devices
from tests.support.exporter import start_exporter
from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_dra_kubelet import DraCallError
from tests.support.fake_kubelet import FakeKubelet, short_tmp_dir
from tests.support.plugin import start_plugin, wait_ready
from tests.support.waiting import until

ROUNDS = 200
RESOURCE = "huawei.com/Ascend910"
HOLD_S = 0.3  # --dra-allocate-hold-s: an Allocate no pod names frees its chip this soon (the default is 120 s)


def out_of_slice(apiserver: FakeApiServer, device: str) -> bool:
    return device not in [d["name"] for d in slice_devices(apiserver)]


def free_for_both(apiserver: FakeApiServer, dp_kubelet: FakeKubelet, chip: str, device: str) -> bool:
    return not out_of_slice(apiserver, device) and chip in dp_kubelet.healthy_ids(RESOURCE)


async def test_an_allocate_and_a_claim_raced_for_one_chip_are_never_both_granted() -> None:
    with FakeApiServer(resource_api_versions=("v1beta1",)) as apiserver, short_tmp_dir("drr-") as workdir:
        apiserver.add_node("node-a", internal_ip="10.1.2.3")
        exporter = start_exporter(workdir / "exporter", profile="910b-8")
        dra_kubelet = kubelet_for(workdir / "k", apiserver)
        await dra_kubelet.start()
        (workdir / "dp").mkdir()
        dp_kubelet = FakeKubelet(workdir / "dp", workdir / "podres")
        await dp_kubelet.start()
        args = [a if a != "dra" else "both" for a in dra_args(workdir, apiserver)]
        plugin = start_plugin(
            workdir, exporter, workdir / "dp", *args, "--dra-allocate-hold-s", str(HOLD_S), kube="api"
        )
        wins = {"allocate": 0, "prepare": 0}
        try:
            await wait_ready(plugin)
            await until(lambda: dp_kubelet.allocatable(RESOURCE) == 8, what="8 allocatable through the device plugin")
            await until(lambda: len(slice_devices(apiserver)) == 8, what="8 devices in the slice")
            started = time.monotonic()
            for i in range(ROUNDS):
                phy = i % 8
                chip, device = f"Ascend910-{phy}", f"ascend910-{phy}"
                pod, _ = put_claim(apiserver, f"race-{i}", device)

                async def allocate(delay: float, chip: str = chip) -> str:
                    """Empty when granted, else the refusal's message."""
                    await asyncio.sleep(delay)
                    try:
                        await dp_kubelet.allocate(RESOURCE, [[chip]])
                    except grpc.aio.AioRpcError as exc:
                        return f"{exc.code().name}: {exc.details()}"
                    return ""

                async def prepare(pod: dict[str, object] = pod, device: str = device) -> bool:
                    try:
                        await dra_kubelet.prepare(pod)
                    except DraCallError:
                        (errors,) = dra_kubelet.calls[-1].errors.values()
                        assert f"{device} is allocated through the device plugin" in errors, errors
                        return False
                    return True

                # The DRA kubelet reads the claim before it calls the driver: Allocate starts up to
                # 30 ms later on some rounds, so that each side is first in some of them.
                refusal, prepared = await asyncio.gather(allocate((i % 7) * 0.005), prepare())
                allocated = not refusal
                if refusal:
                    assert (
                        refusal.startswith("FAILED_PRECONDITION: ") and "is prepared for the DRA claim uid" in refusal
                    )
                assert allocated != prepared, f"round {i}: allocate {allocated}, prepare {prepared}"
                wins["allocate" if allocated else "prepare"] += 1

                # Cleanup: the claim is unprepared; the device plugin's pod is annotated, then goes.
                if prepared:
                    await dra_kubelet.unprepare(pod)
                else:
                    await until(
                        partial(out_of_slice, apiserver, device),
                        timeout=HOLD_S,
                        what=f"round {i}: {device}, allocated through the device plugin, to leave the slice",
                    )
                    apiserver.add_pod(f"dp-{i}", "ml", annotations={"huawei.com/AscendReal": chip},
                                      requests={RESOURCE: 1})  # fmt: skip
                    apiserver.remove("pods", f"dp-{i}", "ml")
                await until(
                    partial(free_for_both, apiserver, dp_kubelet, chip, device),
                    timeout=10,
                    what=f"round {i}: {chip} free for both APIs again",
                )
            elapsed = time.monotonic() - started
            print(f"\n{ROUNDS} rounds in {elapsed:.1f} s: {wins}")
            assert wins["allocate"] and wins["prepare"], wins  # both orders were raced
        finally:
            code = plugin.stop()
            shutil.copyfile(plugin.log_path, Path(tempfile.gettempdir()) / "last-device-plugin-race.log")
            await dp_kubelet.stop()
            await dra_kubelet.stop()
            exporter.stop()
            assert code == 0, plugin.log_path.read_text()[-3000:]
