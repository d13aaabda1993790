"""The exporter as a real process over the C double of libdcmi.so (`--backend dcmi`)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from tests.cdouble.fixtures import cdouble_build_dir, dcmi_double_path  # noqa: F401 - pytest fixtures
from tests.support.exporter import event_stream, running_exporter, take
from tests.support.waiting import START_S, WAIT_S, until


async def test_dcmi_backend_process_serves_chips_events_and_survives_a_hung_chip(
    dcmi_double_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = tmp_path / "double.conf"
    config.write_text(
        "chip 0 0 0 2\nchip 0 1 1 3\nchip 1 0 2 0\nchip 1 1 3 1\n"
        "codes 2 80E01801\n"
        "event 1500 3 8C1FA006 3 1 scheduled fault\n"
    )
    env = {"DCMI_DOUBLE_CONFIG": str(config)}
    args = ("--library", str(dcmi_double_path))
    with running_exporter(tmp_path / "run", *args, backend="dcmi", env=env, wait_ready=False) as ep:
        await until(ep.socket.exists, START_S, "the exporter's socket")
        async with ep.client() as client:

            async def ready() -> dict[str, object] | None:
                node: dict[str, object] = (await client.get("/v1/node")).json()
                return node if node["ready"] else None

            node = await until(ready, START_S, "the exporter to have read every chip")
            assert node["backend"] == "dcmi" and node["subscription"] == "live"
            chips = {c["logic_id"]: c for c in (await client.get("/v1/chips")).json()["chips"]}
            assert {k: (c["card_id"], c["device_id"], c["phy_id"]) for k, c in chips.items()} == {
                0: (0, 0, 2),
                1: (0, 1, 3),
                2: (1, 0, 0),
                3: (1, 1, 1),
            }
            assert all(c["state"] == "ok" for c in chips.values())
            assert chips[2]["dynamic"]["error_codes"]["value"] == ["80E01801"]
            async with event_stream(client, node["last_event_id"]) as stream:  # type: ignore[arg-type]
                [fault] = await asyncio.wait_for(take(stream, 1, {"fault"}), 10)
            body = json.loads(fault.data)
            assert (body["logic_id"], body["phy_id"]) == (3, 1)
            assert body["fault"]["code"] == "8C1FA006" and body["fault"]["source"] == "subscription"
            assert body["fault"]["severity"] == 3

            # Now every call for chip 1 blocks forever (the double re-reads its file).
            with config.open("a") as f:
                f.write("hang 1 forever\n")

            async def listed() -> dict[int, dict[str, Any]]:
                return {c["logic_id"]: c for c in (await client.get("/v1/chips")).json()["chips"]}

            async def chip1_unknown() -> dict[int, dict[str, Any]] | None:
                chips = await listed()
                return chips if chips[1]["state"] == "unknown" else None

            chips = await until(chip1_unknown, what="chip 1 unknown behind its hung calls")
            assert chips[1]["healthy"] is None
            hung_at = time.time()

            async def others_read_on() -> dict[int, dict[str, Any]] | None:
                chips = await listed()
                return chips if min(chips[i]["updated_at"] for i in (0, 2, 3)) > hung_at + 1.0 else None

            # Several poll periods (0.2 s) after the hang, the other chips still answer.
            chips = await until(others_read_on, what="the other chips read a second after chip 1 hung")
            assert [chips[i]["state"] for i in (0, 2, 3)] == ["ok", "ok", "ok"]
            assert chips[1]["state"] == "unknown"
            assert chips[2]["dynamic"]["error_codes"]["value"] == ["80E01801"]
            assert min(chips[i]["updated_at"] for i in (0, 2, 3)) > time.time() - 1.0
        # stop() waits WAIT_S for SIGTERM to end it, then kills it (exit -9).
        assert ep.stop(timeout=WAIT_S) == 0, "SIGTERM ends the exporter even with a library call that never returns"
        assert not ep.socket.exists()


async def test_dcmi_backend_process_on_a_950_node_speaks_v2(
    dcmi_double_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A library whose dcmi_init fails: the exporter speaks dcmiv2_* and reports the chips by logic id."""
    config = tmp_path / "double.conf"
    config.write_text(
        "rc dcmi_init * -8255\n"
        "chip 0 0 0 4\nchip 0 1 1 5\n"
        "str chip_name * Ascend950PR\nint board_id * 0x50\nint mainboard_id * 0x03\n"
        "int super_pod_id * 5\nint server_id * 1\nint chassis_id * 3\nint super_pod_type * 2\nint scale_type * 8192\n"
        "codes 1 80E01801\n"
        "int ddie1 1 0xABCD\nrc dcmiv2_get_device_die_id 0 -8005\n"
    )
    args = ("--library", str(dcmi_double_path))
    with running_exporter(tmp_path / "run", *args, backend="dcmi", env={"DCMI_DOUBLE_CONFIG": str(config)}) as ep:
        async with ep.client() as client:
            node = (await client.get("/v1/node")).json()
            assert (node["chip_count"], node["card_count"]) == (2, 0)
            chips = (await client.get("/v1/chips")).json()["chips"]
    assert [(c["logic_id"], c["phy_id"], c["card_id"], c["device_id"], c["name"]) for c in chips] == [
        (0, 4, -1, -1, "npu-4"),
        (1, 5, -1, -1, "npu-5"),
    ]
    assert {(c["family"], c["resource_type"]) for c in chips} == {("Ascend950", "npu")}
    static = chips[1]["static"]
    fields = ("super_pod_id", "server_index", "rack_id", "super_pod_type", "scale_type", "main_board_id")
    assert [static[f]["value"] for f in fields] == [5, 1, 3, 2, 8192, 0x03]
    assert static["product_type"]["status"] == "unsupported"
    # Die ids through dcmiv2_get_device_die_id: the VDIE and the 950's DDIE as text; chip 0's reads
    # fail, so its ids are null and the chip is served all the same.
    assert (static["vdie_id"], static["ddie_id"]) == (
        "00000001-0000ABCD-00000000-00000000-00000017",
        "00000002-0000ABCD-00000000-00000000-00000017",
    )
    assert (chips[0]["static"]["vdie_id"], chips[0]["static"]["ddie_id"], chips[0]["state"]) == (None, None, "ok")
    assert chips[1]["dynamic"]["error_codes"]["value"] == ["80E01801"]
    assert any(e.get("event") == "chip library initialised" and e.get("api") == "dcmiv2" for e in ep.logs())
