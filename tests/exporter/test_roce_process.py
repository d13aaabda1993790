"""The 910's lost RoCE link-down events in a running exporter (sim, 910b-8): a link that goes down with
its driver event lost (`PUT /v1/sim/chips/{id}/network {"healthy": false, "event": false}`) lists no
code while the subscription is live; a reset job on the chip makes the next RoCE round look at the link
(issue 25 C's "after a reset", noticed through the job even when no poll saw the chip booting) and raise
81078603 (source `roce`), kept through every poll. Bad network requests are refused, state unchanged."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.exporter.test_events import chip_codes
from tests.support.exporter import auth, event_stream, running_exporter, take
from tests.support.waiting import until

LINK_DOWN = "81078603"
RESET_ARGS = ("--time-scale", "20", "--reset-poll-period", "0.05", "--reset-timeout", "5")


async def test_a_lost_link_down_is_found_after_a_reset_job(tmp_path: Path) -> None:
    with running_exporter(tmp_path, *RESET_ARGS) as exporter:
        async with exporter.client() as client, event_stream(client) as stream:
            await take(stream, 1)  # hello
            await asyncio.sleep(0.5)  # past the first RoCE round (one poll period): nothing is down
            body = {"healthy": False, "event": False}
            r = await client.put("/v1/sim/chips/1/network", json=body, headers=auth("sim"))
            assert r.status_code == 204, r.text

            async def unhealthy() -> bool:
                return bool((await client.get("/v1/chips/1")).json()["network_healthy"] is False)

            await until(unhealthy, 5, "chip 1's network health to read unhealthy")
            await asyncio.sleep(1.0)  # several polls and RoCE rounds
            assert await chip_codes(client, 1) == [], "the event is lost and nothing made the exporter look"

            job = (await client.post("/v1/chips/1/reset", headers=auth("reset"))).json()

            async def succeeded() -> bool:
                return bool((await client.get(f"/v1/jobs/{job['id']}")).json()["state"] == "succeeded")

            await until(succeeded, 10, "the reset job to succeed")
            faults = [json.loads(e.data) for e in await asyncio.wait_for(take(stream, 1, {"fault"}), 15)]
            assert [(f["logic_id"], f["fault"]["code"], f["fault"]["source"]) for f in faults] == [
                (1, LINK_DOWN, "roce")
            ]
            await asyncio.sleep(1.0)  # several polls: the derived code stays, and nothing more is raised
            assert await chip_codes(client, 1) == [LINK_DOWN]
            assert [await chip_codes(client, i) for i in range(8) if i != 1] == [[]] * 7


@pytest.mark.parametrize(
    ("profile", "body", "status"),
    [
        ("910b-8", {"healthy": False, "event": "sometimes"}, 422),
        ("910b-8", {"healthy": False, "event": False, "extra": 1}, 422),
        ("310p-4", {"healthy": False, "event": False}, 422),  # no RoCE port
    ],
)
async def test_bad_network_requests_are_refused_and_change_nothing(
    tmp_path: Path, profile: str, body: dict[str, object], status: int
) -> None:
    with running_exporter(tmp_path, profile=profile) as exporter:
        async with exporter.client() as client:
            r = await client.put("/v1/sim/chips/1/network", json=body, headers=auth("sim"))
            assert r.status_code == status, r.text
            chip = (await client.get("/v1/chips/1")).json()
            assert chip["network_healthy"] is not False and chip["dynamic"]["error_codes"]["value"] == []
