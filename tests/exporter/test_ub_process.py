"""The 950's UB/UBoE codes in a running exporter (sim, a5-superpod-8): a UB port down through the
sim API raises 81B18603 + 020001002 (source `ub`) on the stream and in the chip's codes, kept
through every poll; the port coming up clears both; bad port requests are refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.exporter.test_events import chip_codes
from tests.support.exporter import auth, event_stream, running_exporter, take

UB_DOWN, UB_SEPARATE = "81B18603", "020001002"


async def test_a_ub_port_down_separates_the_chip_and_its_recovery_restores_it(tmp_path: Path) -> None:
    with running_exporter(tmp_path, profile="a5-superpod-8") as exporter:
        async with exporter.client() as client, event_stream(client) as stream:
            await take(stream, 1)  # hello
            body = {"kind": "UB", "up": False}
            r = await client.put("/v1/sim/chips/3/ub-ports/0/1", json=body, headers=auth("sim"))
            assert r.status_code == 204, r.text
            faults = [json.loads(e.data) for e in await asyncio.wait_for(take(stream, 2, {"fault"}), 15)]
            by_code = {f["fault"]["code"]: f for f in faults}
            assert set(by_code) == {UB_DOWN, UB_SEPARATE}
            assert by_code[UB_SEPARATE]["logic_id"] == 3
            assert by_code[UB_SEPARATE]["fault"]["source"] == "ub"
            await asyncio.sleep(1.0)  # several polls: the derived code stays
            assert await chip_codes(client, 3) == [UB_DOWN, UB_SEPARATE]
            assert await chip_codes(client, 2) == []
            chip = (await client.get("/v1/chips/3")).json()
            assert chip["dynamic"]["ub_ports"]["value"] == {"ub_down": 1, "bonding_down": 0}

            body = {"kind": "UB", "up": True}
            r = await client.put("/v1/sim/chips/3/ub-ports/0/1", json=body, headers=auth("sim"))
            assert r.status_code == 204, r.text
            recovered = [json.loads(e.data) for e in await asyncio.wait_for(take(stream, 2, {"fault"}), 15)]
            assert {(f["fault"]["code"], f["fault"]["assertion"]) for f in recovered} == {
                (UB_DOWN, "recover"),
                (UB_SEPARATE, "recover"),
            }
            assert await chip_codes(client, 3) == []


async def test_ub_port_requests_need_the_sim_token_a_950_and_a_known_kind(tmp_path: Path) -> None:
    with running_exporter(tmp_path) as exporter:  # 910b-8: no UB ports
        async with exporter.client() as client:
            r = await client.put("/v1/sim/chips/1/ub-ports/0/1", json={"kind": "UB", "up": False})
            assert r.status_code == 401, r.text
            r = await client.put("/v1/sim/chips/1/ub-ports/0/1", json={"kind": "UB", "up": False}, headers=auth("sim"))
            assert r.status_code == 422, r.text
            assert "no UB ports" in r.text
            r = await client.put("/v1/sim/chips/1/ub-ports/0/1", json={"kind": "X", "up": False}, headers=auth("sim"))
            assert r.status_code == 422, r.text
            r = await client.put("/v1/sim/chips/1/ub-ports/0/64", json={"kind": "UB", "up": False}, headers=auth("sim"))
            assert r.status_code == 422, r.text
            r = await client.put("/v1/sim/chips/99/ub-ports/0/1", json={"kind": "UB", "up": False}, headers=auth("sim"))
            assert r.status_code == 404, r.text
            # Nothing changed: the chip reports no codes and no port state.
            assert await chip_codes(client, 1) == []
            chip = (await client.get("/v1/chips/1")).json()
            assert chip["dynamic"]["ub_ports"]["status"] == "unsupported"
