"""Faults through the sim API: the event stream, the snapshot, resume and gaps."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from tests.support.exporter import ExporterProc, auth, event_stream, running_exporter, take


async def chip_codes(client: httpx.AsyncClient, logic_id: int) -> list[str]:
    return list((await client.get(f"/v1/chips/{logic_id}")).json()["dynamic"]["error_codes"]["value"])


async def inject(client: httpx.AsyncClient, logic_id: int, code: str, assertion: str = "occur", **kw: object) -> None:
    r = await client.post(
        f"/v1/sim/chips/{logic_id}/faults", json={"code": code, "assertion": assertion, **kw}, headers=auth("sim")
    )
    assert r.status_code == 204, r.text


async def test_fault_shows_on_events_and_chips_and_recover_clears(exporter: ExporterProc) -> None:
    async with exporter.client() as client, event_stream(client) as stream:
        hello = (await take(stream, 1))[0]
        assert hello.event == "hello" and hello.id == ""  # no id field (httpx-sse reads an absent id as "")
        assert json.loads(hello.data)["subscription"] == "live"
        await inject(client, 2, "80e01801", severity=3)
        [occur] = await asyncio.wait_for(take(stream, 1, {"fault"}), 5)
        data = json.loads(occur.data)
        chip = (await client.get("/v1/chips/2")).json()
        assert data["logic_id"] == 2 and data["phy_id"] == chip["phy_id"] and data["chip"] == chip["name"]
        assert data["fault"] == {
            "code": "80E01801",
            "assertion": "occur",
            "severity": 3,
            "source": "subscription",
            "raised_at_ms": data["fault"]["raised_at_ms"],
            "name": data["fault"]["name"],
        }
        assert occur.id is not None and occur.id == data["id"] and occur.id.rsplit("-", 1)[1].isdigit()
        assert await chip_codes(client, 2) == ["80E01801"]
        # The snapshot says which events it already includes.
        listed = (await client.get("/v1/chips")).json()
        assert int(listed["last_event_id"].rsplit("-", 1)[1]) >= int(occur.id.rsplit("-", 1)[1])

        await inject(client, 2, "80E01801", "recover")
        [recover] = await asyncio.wait_for(take(stream, 1, {"fault"}), 5)
        assert json.loads(recover.data)["fault"]["assertion"] == "recover"
        assert await chip_codes(client, 2) == []
        # The next poll agrees with the subscription: no extra occur or recover appears. The
        # behaviour under test is an absence, so this is a time: three poll periods.
        await asyncio.sleep(0.6)
    async with exporter.client() as client:
        node = (await client.get("/v1/node")).json()
    async with exporter.client() as client, event_stream(client, occur.id) as stream:
        replay = await asyncio.wait_for(take(stream, 1, {"fault", "gap"}), 5)
        assert replay[0].id == recover.id
    assert node["last_event_id"] is not None


async def test_hundred_events_while_disconnected_arrive_once_in_order(exporter: ExporterProc) -> None:
    async with exporter.client() as client:
        async with event_stream(client) as stream:
            await take(stream, 1)  # hello
            await inject(client, 0, "80CB8009", "once")
            [first] = await asyncio.wait_for(take(stream, 1, {"fault"}), 5)
        # Disconnected: 100 events, alternating occur/recover on one chip.
        r = await client.post(
            "/v1/sim/chips/1/bursts", json={"code": "81078603", "count": 100, "mode": "flap"}, headers=auth("sim")
        )
        assert r.json() == {"events": 100}
        async with event_stream(client, first.id) as stream:
            got = await asyncio.wait_for(take(stream, 100, {"fault", "gap"}), 10)
    assert all(m.event == "fault" for m in got)
    seqs = [int(m.id.rsplit("-", 1)[1]) for m in got]
    first_seq = int(first.id.rsplit("-", 1)[1])
    assert seqs == list(range(first_seq + 1, first_seq + 101)), "exactly once and in order"
    assertions = [json.loads(m.data)["fault"]["assertion"] for m in got]
    assert assertions == ["occur", "recover"] * 50
    assert {json.loads(m.data)["logic_id"] for m in got} == {1}


async def test_resume_from_previous_run_yields_one_gap(tmp_path: Path) -> None:
    with running_exporter(tmp_path / "a") as first:
        async with first.client() as client, event_stream(client) as stream:
            await take(stream, 1)
            await inject(client, 0, "80CB8009", "once")
            [old] = await asyncio.wait_for(take(stream, 1, {"fault"}), 5)
    with running_exporter(tmp_path / "b") as second:
        async with second.client() as client:
            async with event_stream(client, old.id) as stream:
                hello, gap = await asyncio.wait_for(take(stream, 2), 5)
                assert hello.event == "hello" and gap.event == "gap"
                body = json.loads(gap.data)
                assert body["reason"] == "other_run" and body["requested"] == old.id
                await inject(client, 0, "80CB8009", "once")
                [after] = await asyncio.wait_for(take(stream, 1, {"fault", "gap"}), 5)
                assert after.event == "fault", "only one gap"
            # Garbage is a gap too, not an error.
            async with event_stream(client, "not-an-id") as stream:
                _, gap = await asyncio.wait_for(take(stream, 2), 5)
                assert json.loads(gap.data)["reason"] == "malformed"


async def test_resume_from_evicted_id_yields_one_gap(exporter: ExporterProc) -> None:
    async with exporter.client() as client:
        async with event_stream(client) as stream:
            await take(stream, 1)
            await inject(client, 0, "80CB8009", "once")
            [old] = await asyncio.wait_for(take(stream, 1, {"fault"}), 5)
        # 20,000 events push the old id out of the 16,384-event buffer.
        for _ in range(2):
            r = await client.post(
                "/v1/sim/chips/1/bursts", json={"code": "80CB8009", "count": 10000, "mode": "once"}, headers=auth("sim")
            )
            assert r.status_code == 200
        async with event_stream(client, old.id) as stream:
            _hello, gap = await asyncio.wait_for(take(stream, 2), 10)
            assert gap.event == "gap"
            body = json.loads(gap.data)
            assert body["reason"] == "evicted"
            assert gap.id == body["resume_after"]
            await inject(client, 3, "80CB8009", "once")
            [nxt] = await asyncio.wait_for(take(stream, 1, {"fault", "gap"}), 10)
            assert nxt.event == "fault" and json.loads(nxt.data)["logic_id"] == 3


async def test_fault_on_other_chip_shows_while_one_chip_hangs(exporter: ExporterProc) -> None:
    async with exporter.client() as client, event_stream(client) as stream:
        await take(stream, 1)
        r = await client.put("/v1/sim/chips/4/hang", json={"seconds": None}, headers=auth("sim"))
        assert r.status_code == 204
        [unknown] = await asyncio.wait_for(take(stream, 1, {"chip"}), 5)
        assert json.loads(unknown.data)["logic_id"] == 4
        assert json.loads(unknown.data)["change"]["state"] == "unknown"
        await inject(client, 5, "8C1FA006", severity=2)
        [fault] = await asyncio.wait_for(take(stream, 1, {"fault"}), 5)
        assert json.loads(fault.data)["logic_id"] == 5
        chips = {c["logic_id"]: c for c in (await client.get("/v1/chips")).json()["chips"]}
        assert chips[4]["state"] == "unknown" and chips[4]["healthy"] is None
        assert chips[5]["dynamic"]["error_codes"]["value"] == ["8C1FA006"]
        assert all(chips[i]["state"] == "ok" for i in chips if i != 4)
        # Release: the chip answers again.
        r = await client.delete("/v1/sim/chips/4/hang", headers=auth("sim"))
        assert r.status_code == 204
        [back] = await asyncio.wait_for(take(stream, 1, {"chip"}), 5)
        assert json.loads(back.data)["change"]["state"] == "ok"


async def test_card_drop_reports_40F84E00(exporter: ExporterProc) -> None:
    async with exporter.client() as client, event_stream(client) as stream:
        await take(stream, 1)
        chip = (await client.get("/v1/chips/6")).json()
        r = await client.put(f"/v1/sim/cards/{chip['card_id']}/dropped", json={"dropped": True}, headers=auth("sim"))
        assert r.status_code == 204
        [fault] = await asyncio.wait_for(take(stream, 1, {"fault"}), 5)
        assert json.loads(fault.data)["fault"]["code"] == "40F84E00"
        dropped = (await client.get("/v1/chips/6")).json()
        assert dropped["state"] == "card_drop" and dropped["healthy"] is False
        assert dropped["dynamic"]["health"] == {"status": "error", "value": None, "code": -8012}
        assert "40F84E00" in dropped["dynamic"]["error_codes"]["value"]
        await client.put(f"/v1/sim/cards/{chip['card_id']}/dropped", json={"dropped": False}, headers=auth("sim"))
        [recover] = await asyncio.wait_for(take(stream, 1, {"fault"}), 5)
        assert json.loads(recover.data)["fault"] == {
            **json.loads(recover.data)["fault"],
            "code": "40F84E00",
            "assertion": "recover",
        }
