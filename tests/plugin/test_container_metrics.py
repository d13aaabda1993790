"""npu-exporter's container families on the plugin's /metrics (issue 26 item 9): a real plugin beside
a simulated exporter, the fake kubelet's PodResources on a Unix socket saying which container holds
which chip; and a kubelet whose PodResources hangs delays no scrape."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
from ascend_common.adapters.kubelet import podresources_pb2 as pr
from ascend_common.adapters.kubelet import podresources_pb2_grpc as pr_grpc
from ascend_common.schemas.exporter import ChipList
from prometheus_client.parser import text_string_to_metric_families

from tests.plugin.conftest import close_node, make_node
from tests.support.exporter import TOKENS, auth, start_exporter
from tests.support.fake_kubelet import FakeKubelet
from tests.support.plugin import start_plugin, wait_ready
from tests.support.waiting import until

PERIOD = "0.2"
CONTAINER_FAMILIES = ("npu_container_info", "container_npu_utilization", "container_npu_total_memory",
                      "container_npu_used_memory")  # fmt: skip


def container_series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {name: [] for name in CONTAINER_FAMILIES}
    for family in text_string_to_metric_families(text):
        if family.name in out:
            out[family.name].extend((dict(s.labels), s.value) for s in family.samples)
    return out


async def test_the_plugin_serves_the_container_families_of_the_chips_a_container_holds(workdir: Path) -> None:
    node = await make_node(workdir, "--container-metrics-period", PERIOD)
    try:
        await wait_ready(node.plugin)
        node.kubelet.set_pod_resources(
            [
                ("team-a", "train-0", "main", "huawei.com/Ascend910", ["Ascend910-0", "Ascend910-1"]),
                ("team-a", "train-0", "sidecar", "", []),
                ("team-b", "other", "gpu", "nvidia.com/gpu", ["gpu-0"]),
            ]
        )

        async def scraped() -> dict[str, list[tuple[dict[str, str], float]]] | None:
            series = container_series(await asyncio.to_thread(node.plugin.metrics))
            return series if len(series["npu_container_info"]) == 2 else None

        series = await until(scraped, 10, "the container families of both chips")
        with node.exporter.sync_client() as client:
            chips = {c.phy_id: c for c in ChipList.model_validate_json(client.get("/v1/chips").content).chips}
        for labels, value in series["npu_container_info"]:
            assert value == 1
            chip = chips[int(labels["npuID"])]
            assert labels == {
                "npuID": str(chip.phy_id), "model_name": f"Ascend{chip.static.chip_name.value}",
                "vdie_id": chip.static.vdie_id or "", "pcie_bus_info": "", "namespace": "team-a",
                "pod_name": "train-0", "container_name": "main", "containerID": "",
                "containerName": "team-a_train-0_main",
            }  # fmt: skip
        assert sorted(int(labels["npuID"]) for labels, _ in series["npu_container_info"]) == [0, 1]
        for name in ("container_npu_utilization", "container_npu_total_memory", "container_npu_used_memory"):
            assert sorted(int(labels["id"]) for labels, _ in series[name]) == [0, 1], name
            assert all(
                labels["pod_name"] == "train-0" and labels["container_name"] == "main" for labels, _ in series[name]
            )
        for labels, value in series["container_npu_total_memory"]:
            hbm = chips[int(labels["id"])].dynamic.hbm.value  # type: ignore[union-attr]
            assert hbm is not None and value == hbm.total_mb

        # The pod ends: its series go with the next sample.
        node.kubelet.set_pod_resources([])

        async def gone() -> bool:
            return not any(container_series(await asyncio.to_thread(node.plugin.metrics)).values())

        await until(gone, 10, "the container series to go with the pod")
    finally:
        await close_node(node)


async def test_the_exporter_learns_a_vnpus_holder_from_the_plugin_and_serves_its_vnpu_families(workdir: Path) -> None:
    """The plugin's PUT /v1/containers names a 310P vNPU's holder by its vdev id (the kubelet's id
    `Ascend310P-2c-<vdev>-<phy>`), and the exporter's vnpu_pod_* series carry that pod."""
    token_file = workdir / "plugin-token"  # the plugin's own token: scope `containers`
    token_file.write_text(" ".join(TOKENS["containers"]) + "\n")
    token_file.chmod(0o600)
    node = await make_node(
        workdir, "--container-metrics-period", PERIOD, "--token-file", str(token_file), profile="310p-4"
    )
    try:
        await wait_ready(node.plugin)
        with node.exporter.sync_client() as client:
            created = client.post("/v1/chips/0/vnpus", json={"template": "vir02"}, headers=auth("vnpu"))
            assert created.status_code == 201, created.text
            vdev, phy = created.json()["vdev_id"], client.get("/v1/chips/0").json()["phy_id"]
        device = f"Ascend310P-2c-{vdev}-{phy}"
        node.kubelet.set_pod_resources([("team-v", "infer-0", "serve", "huawei.com/Ascend310P-2c", [device])])

        def held() -> list[dict[str, str]] | None:
            text = httpx.get(node.exporter.metrics_url + "/metrics").text
            found = [
                dict(s.labels)
                for f in text_string_to_metric_families(text)
                if f.name == "vnpu_pod_total_memory"
                for s in f.samples
            ]
            return found or None

        [labels] = await until(held, 10, "the exporter's vNPU series naming the plugin's pod")
        assert (labels["v_dev_id"], labels["id"], labels["aicore_count"]) == (str(vdev), str(phy), "2.00")
        assert (labels["namespace"], labels["pod_name"], labels["container_name"]) == ("team-v", "infer-0", "serve")
        node.kubelet.set_pod_resources([])
        await until(lambda: None if held() else True, 10, "the vNPU series to go with the pod")
    finally:
        await close_node(node)


class _HangingPodResources(pr_grpc.PodResourcesListerServicer):
    def __init__(self) -> None:
        self.calls = 0

    async def List(self, request: pr.ListPodResourcesRequest, context: Any) -> pr.ListPodResourcesResponse:
        self.calls += 1
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def GetAllocatableResources(
        self, request: pr.AllocatableResourcesRequest, context: Any
    ) -> pr.AllocatableResourcesResponse:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


async def test_a_hanging_kubelet_podresources_delays_no_scrape(workdir: Path) -> None:
    exporter = start_exporter(workdir / "exporter")
    plugin_dir = workdir / "dp"
    plugin_dir.mkdir()
    kubelet = FakeKubelet(plugin_dir)  # registration only: PodResources is the hanging server below
    await kubelet.start()
    (workdir / "podres").mkdir()
    hanging = _HangingPodResources()
    server = grpc.aio.server()
    pr_grpc.add_PodResourcesListerServicer_to_server(hanging, server)
    server.add_insecure_port(f"unix://{workdir / 'podres' / 'kubelet.sock'}")
    await server.start()
    plugin = start_plugin(workdir, exporter, plugin_dir, "--container-metrics-period", PERIOD)
    try:
        await wait_ready(plugin)
        await until(lambda: hanging.calls >= 2, 10, "the sampling task to ask the hanging kubelet twice")
        for _ in range(5):
            started = time.monotonic()
            text = await asyncio.to_thread(plugin.metrics)
            assert time.monotonic() - started < 1.0, "a scrape waited on the kubelet"
            assert "# TYPE container_npu_utilization gauge" in text
            assert "ascend_device_plugin_devices" in text
            await asyncio.sleep(0.1)
    finally:
        code = plugin.stop()
        await server.stop(None)
        await kubelet.stop()
        exporter.stop()
    assert code == 0, plugin.log_path.read_text()[-3000:]


async def test_a_stopped_exporter_delays_no_scrape_and_its_readings_are_not_served_stale(workdir: Path) -> None:
    node = await make_node(workdir, "--container-metrics-period", PERIOD)
    try:
        await wait_ready(node.plugin)
        node.kubelet.set_pod_resources([("ns", "p", "c", "huawei.com/Ascend910", ["Ascend910-0"])])

        async def families() -> dict[str, list[tuple[dict[str, str], float]]]:
            return container_series(await asyncio.to_thread(node.plugin.metrics))

        async def with_values() -> bool:
            return bool((await families())["container_npu_utilization"])

        await until(with_values, 10, "the chip's container utilization")
        os.kill(node.exporter.proc.pid, signal.SIGSTOP)  # every exporter call now hangs
        try:

            async def info_only() -> bool:
                series = await families()
                return bool(series["npu_container_info"]) and not series["container_npu_utilization"]

            await until(info_only, 10, "the readings to go while the exporter hangs, the mapping to stay")
            for _ in range(5):
                started = time.monotonic()
                await asyncio.to_thread(node.plugin.metrics)
                assert time.monotonic() - started < 1.0, "a scrape waited on the exporter"
                await asyncio.sleep(0.1)
        finally:
            os.kill(node.exporter.proc.pid, signal.SIGCONT)
        await until(with_values, 10, "the readings to come back with the exporter")
    finally:
        await close_node(node)
