"""The chip series' pod labels: the device plugin PUTs who holds which chip, the next scrape names the
pod on every chip family, and when the pod goes (a new mapping without it, a DELETE, or no refresh
within --containers-ttl) its labels go with it and no series keeps the old ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.exporter import ExporterProc, auth, running_exporter
from tests.support.waiting import until

HELD = {"chips": [{"phy_id": 0, "containers": [{"namespace": "ns-a", "pod": "job-0", "container": "train"}]}]}


def series(ep: ExporterProc) -> list[tuple[str, dict[str, str]]]:
    text = httpx.get(ep.metrics_url + "/metrics").text
    return [(s.name, s.labels) for f in text_string_to_metric_families(text) for s in f.samples]


def held_by_job0(ep: ExporterProc) -> dict[str, dict[str, str]] | None:
    """family -> labels of its series that name pod job-0, or None when none does."""
    found = {name: labels for name, labels in series(ep) if labels.get("pod_name") == "job-0"}
    return found or None


def no_job0(ep: ExporterProc) -> bool | None:
    return True if not any("job-0" in labels.values() for _, labels in series(ep)) else None


async def put(ep: ExporterProc, body: dict[str, Any], token: str = "containers") -> int:
    async with ep.client() as client:
        return (await client.put("/v1/containers", json=body, headers=auth(token))).status_code


async def test_pod_labels_appear_on_a_held_chip_and_disappear_when_the_pod_goes(tmp_path: Path) -> None:
    with running_exporter(tmp_path, "--telemetry-period", "0.2") as ep:
        assert await put(ep, HELD, token="sim") == 403  # another scope may not say who holds chips
        assert await put(ep, HELD) == 204
        families = ("npu_chip_info_utilization", "npu_chip_info_health_status", "npu_chip_info_voltage")

        def held_in_every_family() -> dict[str, dict[str, str]] | None:
            # Voltage is a telemetry family: its first sample may come a round after the chip families.
            found = held_by_job0(ep)
            return found if found is not None and all(name in found for name in families) else None

        found = await until(held_in_every_family, what="series of each family naming pod job-0")
        for name in families:
            assert name in found, name
            assert (found[name]["id"], found[name]["namespace"], found[name]["container_name"]) == (
                "0", "ns-a", "train"
            ), name  # fmt: skip
        # Every other chip's series carry the three labels empty, as npu-exporter's CardLabel.
        others = [
            labels for name, labels in series(ep) if name == "npu_chip_info_health_status" and labels["id"] != "0"
        ]
        assert others and all((o["namespace"], o["pod_name"], o["container_name"]) == ("", "", "") for o in others)
        assert await put(ep, {"chips": []}) == 204  # the pod went
        await until(lambda: no_job0(ep), what="no series naming job-0 after the pod went")
        assert await put(ep, HELD) == 204
        await until(lambda: held_by_job0(ep), what="job-0 back")
        async with ep.client() as client:
            assert (await client.delete("/v1/containers", headers=auth("containers"))).status_code == 204
        await until(lambda: no_job0(ep), what="no series naming job-0 after a DELETE")


async def test_a_mapping_not_refreshed_within_the_ttl_is_forgotten(tmp_path: Path) -> None:
    with running_exporter(tmp_path, "--containers-ttl", "1") as ep:
        assert await put(ep, HELD) == 204
        await until(lambda: held_by_job0(ep), what="series naming pod job-0")
        await until(lambda: no_job0(ep), 5.0, "the labels gone once the mapping is older than its TTL")


async def test_a_chip_several_containers_hold_says_so_in_all_three_labels(tmp_path: Path) -> None:
    two = [{"namespace": "ns", "pod": f"p{i}", "container": "c"} for i in range(2)]
    with running_exporter(tmp_path) as ep:
        assert await put(ep, {"chips": [{"phy_id": 0, "containers": two}]}) == 204

        def shared() -> dict[str, str] | None:
            return next(
                (lb for name, lb in series(ep) if name == "npu_chip_info_health_status" and lb["id"] == "0"
                 and lb["pod_name"] == "not_displayed_for_multi_pod"),
                None,
            )  # fmt: skip

        labels = await until(shared, what="the multi-pod label on chip 0")
        assert labels["namespace"] == labels["container_name"] == "not_displayed_for_multi_pod"
