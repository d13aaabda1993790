"""The chip inventory over the Unix socket, for every simulator profile."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
import pytest
from ascend_common.chips import detect_family

from tests.support.exporter import ExporterProc, running_exporter

PROFILES = {
    # profile: (chips, cards, family, resource, chip name, aicore, logic != phy somewhere)
    "910b-8": (8, 8, "Ascend910B", "Ascend910", "910B3", 20, True),
    "910a-8": (8, 8, "Ascend910", "Ascend910", "910A", 32, False),
    "a3-16": (16, 8, "Ascend910A3", "Ascend910", "910B3", 24, True),
    "310p-duo-4": (4, 2, "Ascend310P", "Ascend310P", "310P3", 8, False),
    "310p-4": (4, 4, "Ascend310P", "Ascend310P", "310P3", 8, False),
    # 950: the v2 library reports chips by logic id and no cards (card and device id -1).
    "a5-superpod-8": (8, 0, "Ascend950", "npu", "Ascend950DT", 25, True),
    "a5-atlas350-4p": (4, 0, "Ascend950", "npu", "Ascend950PR", 25, True),
}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_chips_of_every_profile(tmp_path: Path, profile: str) -> None:
    n_chips, n_cards, family, rtype, name, aicore, permuted = PROFILES[profile]
    with running_exporter(tmp_path, profile=profile) as ep, ep.sync_client() as client:
        body = client.get("/v1/chips").json()
        node = client.get("/v1/node").json()
    chips = body["chips"]
    assert len(chips) == n_chips
    assert node["chip_count"] == n_chips and node["card_count"] == n_cards
    assert node["backend"] == "sim" and node["profile"] == profile and node["ready"] is True
    assert sorted(c["logic_id"] for c in chips) == list(range(n_chips))
    assert sorted(c["phy_id"] for c in chips) == list(range(n_chips))
    assert any(c["logic_id"] != c["phy_id"] for c in chips) is permuted
    for chip in chips:
        static, dyn = chip["static"], chip["dynamic"]
        assert chip["family"] == family
        assert chip["resource_type"] == rtype
        assert chip["name"] == f"{rtype}-{chip['phy_id']}"
        assert static["chip_name"] == {"status": "ok", "value": name, "code": None}
        assert static["aicore"]["value"] == aicore
        assert detect_family(static["chip_name"]["value"], static["board_id"]["value"]).value == family
        assert chip["state"] == "ok" and chip["healthy"] is True
        if rtype in ("Ascend910", "npu"):
            assert chip["network_healthy"] is True
            assert dyn["network_health"] == {"status": "ok", "value": 0, "code": None}
        else:  # inference cards have no RoCE port: the library says "not supported"
            assert chip["network_healthy"] is None
            assert dyn["network_health"]["status"] == "unsupported"
        assert dyn["health"] == {"status": "ok", "value": 0, "code": None}
        assert dyn["error_codes"]["value"] == []
        assert dyn["hbm"]["value"]["total_mb"] > 0
        assert 0 <= dyn["hbm"]["value"]["used_mb"] <= dyn["hbm"]["value"]["total_mb"]
        assert dyn["boot_status"]["value"] == 16
        assert {"card_id", "device_id"} <= chip.keys()
    # Cards hold the chips the profile says: e.g. 300I Duo has two chips a card.
    per_card: dict[int, int] = {}
    for chip in chips:
        per_card[chip["card_id"]] = per_card.get(chip["card_id"], 0) + 1
    if n_cards:
        assert set(per_card.values()) == {n_chips // n_cards}
    else:
        assert {(c["card_id"], c["device_id"]) for c in chips} == {(-1, -1)}


def test_single_chip_and_unknown_chip(exporter: ExporterProc) -> None:
    with exporter.sync_client() as client:
        chips = client.get("/v1/chips").json()["chips"]
        one = client.get(f"/v1/chips/{chips[3]['logic_id']}").json()
        assert (one["logic_id"], one["phy_id"], one["name"]) == (
            chips[3]["logic_id"],
            chips[3]["phy_id"],
            chips[3]["name"],
        )
        missing = client.get("/v1/chips/99")
        assert missing.status_code == 404
        assert "no chip with logic id 99" in missing.json()["detail"]
        assert client.get("/v1/chips/-1").status_code == 422
        assert client.get("/v1/chips/abc").status_code == 422


def test_socket_is_0660_and_ops_endpoints(exporter: ExporterProc) -> None:
    mode = stat.S_IMODE(exporter.socket.stat().st_mode)
    assert mode == 0o660
    assert httpx.get(exporter.metrics_url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(exporter.metrics_url + "/readyz").json()["chips"] == 8
    # The local API is not on TCP and the ops port serves no API.
    assert httpx.get(exporter.metrics_url + "/v1/chips").status_code == 404


def test_openapi_is_served(exporter: ExporterProc) -> None:
    with exporter.sync_client() as client:
        spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/v1/node",
        "/v1/chips",
        "/v1/chips/{logic_id}",
        "/v1/events",
        "/v1/chips/{logic_id}/reset",
        "/v1/jobs/{job_id}",
        "/v1/chips/{logic_id}/vnpus",
        "/v1/sim/chips/{logic_id}/faults",
    ):
        assert path in paths, path
