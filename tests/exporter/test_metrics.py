"""Prometheus metrics: npu-exporter names, values equal to the snapshot, -1 for a silent chip."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.exporter import ExporterProc, auth
from tests.support.waiting import until


def scrape(ep: ExporterProc) -> dict[str, dict[str, float]]:
    """family -> {phy id (or "" for node-level): value}."""
    text = httpx.get(ep.metrics_url + "/metrics").text
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[sample.labels.get("id", "")] = sample.value
    return out


async def test_metrics_equal_the_snapshot_and_a_silent_chip_reports_minus_one(exporter: ExporterProc) -> None:
    async with exporter.client() as client:
        await client.put(
            "/v1/sim/chips/0/processes", json={"processes": [{"pid": 7, "memory_bytes": 3 << 30}]}, headers=auth("sim")
        )
        await client.post("/v1/sim/chips/1/faults", json={"code": "80E01801", "severity": 3}, headers=auth("sim"))

        async def polled() -> list[dict[str, Any]] | None:
            chips: list[dict[str, Any]] = (await client.get("/v1/chips")).json()["chips"]
            by_logic = {c["logic_id"]: c for c in chips}
            seen = by_logic[0]["dynamic"]["processes"]["value"] and by_logic[1]["healthy"] is False
            return chips if seen else None

        # Freeze telemetry for the comparison: chip reads are every 0.2 s, so compare a
        # scrape with the snapshots taken right before and after it.
        before = await until(polled, what="a poll that sees chip 0's process and chip 1's fault")
        metrics = scrape(exporter)
        after = (await client.get("/v1/chips")).json()["chips"]
    assert metrics["machine_npu_nums"][""] == 8
    assert "npu_exporter_version_info" in metrics
    for b, a in zip(before, after, strict=True):
        phy = str(b["phy_id"])
        for chip in (b, a):
            d = chip["dynamic"]
            expected_health = 1 if chip["healthy"] else 0
            assert metrics["npu_chip_info_health_status"][phy] == expected_health
            assert metrics["npu_chip_info_hbm_total_memory"][phy] == d["hbm"]["value"]["total_mb"]
            assert metrics["npu_chip_info_process_info_num"][phy] == len(d["processes"]["value"])
            codes = d["error_codes"]["value"]
            # npu-exporter shows no error_code series for a chip without a code.
            assert metrics["npu_chip_info_error_code"].get(phy) == (int(codes[0], 16) if codes else None)
        for fam, key in (("npu_chip_info_temperature", "temperature_c"), ("npu_chip_info_power", "power_w")):
            assert metrics[fam][phy] in (b["dynamic"][key]["value"], a["dynamic"][key]["value"])
        assert metrics["npu_chip_info_hbm_used_memory"][phy] in (
            b["dynamic"]["hbm"]["value"]["used_mb"],
            a["dynamic"]["hbm"]["value"]["used_mb"],
        )
    chip1 = next(c for c in after if c["logic_id"] == 1)
    assert metrics["npu_chip_info_health_status"][str(chip1["phy_id"])] == 0
    assert metrics["npu_chip_info_error_code"][str(chip1["phy_id"])] == 0x80E01801
    chip0 = next(c for c in after if c["logic_id"] == 0)
    assert metrics["npu_chip_info_process_info_num"][str(chip0["phy_id"])] == 1

    async with exporter.client() as client:
        await client.put("/v1/sim/chips/2/hang", json={"seconds": None}, headers=auth("sim"))

        async def silent() -> dict[str, Any] | None:
            chip: dict[str, Any] = (await client.get("/v1/chips/2")).json()
            return chip if chip["state"] == "unknown" else None

        chip2 = await until(silent, what="chip 2 unknown behind its hung call")
        metrics = scrape(exporter)
        await client.delete("/v1/sim/chips/2/hang", headers=auth("sim"))
    phy2 = str(chip2["phy_id"])
    assert metrics["npu_chip_info_health_status"][phy2] == -1
    for family in ("npu_chip_info_temperature", "npu_chip_info_power", "npu_chip_info_hbm_used_memory"):
        assert phy2 not in metrics[family], f"{family} must drop the silent chip's series"
    assert metrics["dcmi_exporter_hung_calls"][""] >= 1
