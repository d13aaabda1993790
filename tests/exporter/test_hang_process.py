"""Hung-job detection in a running exporter (sim): an idle job raises 200001002 (source `hang`) on
the event stream and in the chip's codes, through every poll; the job ending clears it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.exporter.test_events import chip_codes
from tests.support.exporter import auth, event_stream, running_exporter, take

HANG_CODE = "200001002"


async def test_idle_job_raises_200001002_and_ending_it_recovers(tmp_path: Path) -> None:
    config = tmp_path / "hang.json"
    config.write_text('{"HangDetection":{"Enabled":true,"Threshold":{"DetectDuration":2}}}')
    with running_exporter(tmp_path, "--hang-interval", "0.2", "--hang-config", str(config)) as exporter:
        async with exporter.client() as client, event_stream(client) as stream:
            await take(stream, 1)  # hello
            r = await client.put("/v1/sim/chips/1/idle-job", json={"pids": [4242, 77]}, headers=auth("sim"))
            assert r.status_code == 204, r.text
            [occur] = await asyncio.wait_for(take(stream, 1, {"fault"}), 10)
            data = json.loads(occur.data)
            assert data["logic_id"] == 1
            fault = data["fault"]
            assert (fault["code"], fault["assertion"], fault["source"]) == (HANG_CODE, "occur", "hang")
            assert abs(fault["raised_at_ms"] / 1000 - data["time"]) < 5, "raised_at is in ms"
            chip = (await client.get("/v1/chips/1")).json()
            assert chip["dynamic"]["utilization"]["value"]["aicore_pct"] == 0
            assert sorted(p["pid"] for p in chip["dynamic"]["processes"]["value"]) == [77, 4242]
            # Polls (every 0.2 s) report no such code: the exporter keeps it.
            await asyncio.sleep(1.0)
            assert await chip_codes(client, 1) == [HANG_CODE]
            assert await chip_codes(client, 0) == []

            r = await client.delete("/v1/sim/chips/1/idle-job", headers=auth("sim"))
            assert r.status_code == 204, r.text
            [recover] = await asyncio.wait_for(take(stream, 1, {"fault"}), 10)
            fault = json.loads(recover.data)["fault"]
            assert (fault["code"], fault["assertion"], fault["source"]) == (HANG_CODE, "recover", "hang")
            assert await chip_codes(client, 1) == []
            chip = (await client.get("/v1/chips/1")).json()
            assert chip["dynamic"]["processes"]["value"] == []
        logs = [line for line in exporter.logs() if line.get("code") == HANG_CODE]
        assert any(line.get("chip") == chip["name"] and line["level"] == "warning" for line in logs), logs


async def test_idle_job_needs_the_sim_token_and_pids(tmp_path: Path) -> None:
    with running_exporter(tmp_path, "--hang-interval", "0.2") as exporter:
        async with exporter.client() as client:
            r = await client.put("/v1/sim/chips/1/idle-job", json={"pids": [42]})
            assert r.status_code == 401, r.text
            r = await client.put("/v1/sim/chips/1/idle-job", json={"pids": []}, headers=auth("sim"))
            assert r.status_code == 422, r.text
            r = await client.put("/v1/sim/chips/99/idle-job", json={"pids": [42]}, headers=auth("sim"))
            assert r.status_code == 404, r.text
            r = await client.delete("/v1/sim/chips/1/idle-job")
            assert r.status_code == 401, r.text
