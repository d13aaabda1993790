"""The 310P's vNPU families on a running exporter (the simulator): a vNPU created through the API
and held by one container (the device plugin's `PUT /v1/containers`, by vdev id) gets its
`vnpu_pod_*` series; a vNPU nobody holds, or several hold, gets none; a mapping that names a vNPU
badly is refused with a 422 that says why, and the last good mapping stays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.exporter import ExporterProc, auth, running_exporter
from tests.support.waiting import until

FAMILIES = ("vnpu_pod_aicore_utilization", "vnpu_pod_total_memory", "vnpu_pod_used_memory")
HOLDER = {"namespace": "ns-a", "pod": "infer-0", "container": "serve"}


def vnpu_series(ep: ExporterProc) -> list[tuple[str, dict[str, str], float]]:
    text = httpx.get(ep.metrics_url + "/metrics").text
    return [
        (s.name, s.labels, s.value)
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name in FAMILIES
    ]


async def put(ep: ExporterProc, body: Any) -> httpx.Response:
    async with ep.client() as client:
        return await client.put("/v1/containers", json=body, headers=auth("containers"))


async def create_vnpu(ep: ExporterProc, template: str) -> int:
    async with ep.client() as client:
        resp = await client.post("/v1/chips/0/vnpus", json={"template": template}, headers=auth("vnpu"))
    assert resp.status_code == 201, resp.text
    vdev: int = resp.json()["vdev_id"]
    return vdev


@pytest.fixture
def ep_310p(tmp_path: Path) -> Any:
    with running_exporter(tmp_path, "--telemetry-period", "0.2", profile="310p-4") as ep:
        yield ep


async def test_a_held_vnpu_has_its_three_series_and_loses_them_when_its_holder_goes(ep_310p: ExporterProc) -> None:
    ep = ep_310p
    vdev = await create_vnpu(ep, "vir02")
    other = await create_vnpu(ep, "vir01")  # held by no one: no series
    assert (await put(ep, {"chips": [], "vnpus": [{"vdev_id": vdev, "containers": [HOLDER]}]})).status_code == 204

    def three() -> list[tuple[str, dict[str, str], float]] | None:
        found = vnpu_series(ep)
        return found if len(found) == 3 else None

    found = await until(three, what="the held vNPU's three series")
    assert sorted(name for name, _, _ in found) == sorted(FAMILIES)
    for _, labels, _ in found:
        assert labels == {
            "id": "0", "model_name": "Ascend310P3", "v_dev_id": str(vdev), "aicore_count": "2.00",
            "namespace": "ns-a", "pod_name": "infer-0", "container_name": "serve", "is_virtual": "true",
        }  # fmt: skip
    values = {name: value for name, _, value in found}
    assert (
        0 <= values["vnpu_pod_used_memory"] <= values["vnpu_pod_total_memory"] and values["vnpu_pod_total_memory"] > 0
    )
    assert str(other) not in {labels["v_dev_id"] for _, labels, _ in found}

    # Two holders: none (the reference's "multiple containers").
    two = [HOLDER, {**HOLDER, "pod": "infer-1"}]
    assert (await put(ep, {"chips": [], "vnpus": [{"vdev_id": vdev, "containers": two}]})).status_code == 204
    await until(lambda: True if not vnpu_series(ep) else None, what="no series for a vNPU two containers hold")
    # The chips-only mapping of a plugin of the release before: accepted, and holds no vNPU.
    assert (await put(ep, {"chips": [{"phy_id": 0, "containers": [HOLDER]}]})).status_code == 204
    assert (await put(ep, {"chips": [], "vnpus": [{"vdev_id": vdev, "containers": [HOLDER]}]})).status_code == 204
    await until(three, what="the series back")
    async with ep.client() as client:
        assert (await client.delete("/v1/containers", headers=auth("containers"))).status_code == 204
    await until(lambda: True if not vnpu_series(ep) else None, what="no series after a DELETE")


@pytest.mark.parametrize(
    ("vnpus", "says"),
    [
        ([{"vdev_id": 99, "containers": [HOLDER]}], "greater than or equal to 100"),
        ([{"vdev_id": 1124, "containers": [HOLDER]}], "less than or equal to 1123"),
        ([{"vdev_id": 100, "containers": [HOLDER]}, {"vdev_id": 100, "containers": []}], "vdev_id 100 is listed twice"),
        ([{"vdev_id": 100, "containers": [HOLDER], "phy_id": 0}], "Extra inputs are not permitted"),
        ([{"vdev_id": 100}], "Field required"),
        ([{"vdev_id": "x", "containers": [HOLDER]}], "valid integer"),
        ([{"vdev_id": 100, "containers": [{**HOLDER, "pod": ""}]}], "at least 1 character"),
        ([{"vdev_id": 100, "containers": [HOLDER] * 65}], "at most 64 items"),
        ({"vdev_id": 100}, "valid list"),
    ],
)
async def test_a_bad_vnpu_mapping_is_refused_with_the_reason_and_the_last_good_one_stays(
    tmp_path: Path, vnpus: Any, says: str
) -> None:
    with running_exporter(tmp_path, "--telemetry-period", "0.2", profile="310p-4") as ep:
        vdev = await create_vnpu(ep, "vir02")
        good = {"chips": [], "vnpus": [{"vdev_id": vdev, "containers": [HOLDER]}]}
        assert (await put(ep, good)).status_code == 204
        await until(lambda: True if len(vnpu_series(ep)) == 3 else None, what="the held vNPU's series")
        resp = await put(ep, {"chips": [], "vnpus": vnpus})
        assert resp.status_code == 422, resp.text
        assert says in resp.text, resp.text
        assert len(vnpu_series(ep)) == 3  # the refused mapping replaced nothing
