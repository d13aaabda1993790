"""ChipStatic.urma, NodeInfo.nic_addresses and npu_nics through the exporter's HTTP API (issue 25 part A)."""

from __future__ import annotations

import json
from pathlib import Path

from dcmi_exporter.tasks.nics import host_addresses

from tests.cdouble.fixtures import cdouble_build_dir, dcmi_double_path  # noqa: F401 - pytest fixtures
from tests.support.exporter import running_exporter

POD_PHY_1 = [
    ["00000000000101000000000000000000", "00000000000201000000000000000000", "00000000003f01000000000000000000"],
    ["00000000000502000000000000000000", "00000000003f02000000000000000000"],
    ["00000000004702000000000000000000", "00000000007f02000000000000000000"],
]


def test_sim_pod_serves_urma_and_the_simulated_hosts_mapped_nics(tmp_path: Path) -> None:
    """The issue's L3 inputs: mapping 1 -> [ens1f0, ens1f2]; the simulated host's ens1f0 has only
    fe80::1 and ens1f2 has 10.0.0.7. The machine running the simulator lends it none of its NICs."""
    mapping = tmp_path / "npu-nic-mapping.json"
    mapping.write_text(json.dumps({"npuNics": [{"npuId": 1, "nicNames": ["ens1f0", "ens1f2", "nic-absent0"]}]}))
    args = ("--npu-nic-mapping", str(mapping))
    with running_exporter(tmp_path / "run", *args, profile="a5-superpod-8") as ep, ep.sync_client() as client:
        chips = client.get("/v1/chips").json()["chips"]
        node = client.get("/v1/node").json()
    by_phy = {c["phy_id"]: c["static"]["urma"] for c in chips}
    assert by_phy[1] == [{"index": i, "eids": eids} for i, eids in enumerate(POD_PHY_1)]
    assert all(urma is not None and len(urma) == 3 for urma in by_phy.values())
    assert node["nic_addresses"] == {"ens1f0": ["fe80::1"], "ens1f2": ["10.0.0.7"], "nic-absent0": []}
    assert node["npu_nics"] == {"1": ["ens1f0", "ens1f2", "nic-absent0"]}  # JSON keys: the ids as strings


def test_dcmi_backend_serves_the_real_hosts_nics(dcmi_double_path: Path, tmp_path: Path) -> None:  # noqa: F811
    mapping = tmp_path / "npu-nic-mapping.json"
    mapping.write_text(json.dumps({"npuNics": [{"npuId": 0, "nicNames": ["nic-absent0", "lo"]}]}))
    args = ("--library", str(dcmi_double_path), "--npu-nic-mapping", str(mapping))
    with running_exporter(tmp_path / "run", *args, backend="dcmi") as ep, ep.sync_client() as client:
        node = client.get("/v1/node").json()
    assert node["nic_addresses"] == {"nic-absent0": [], "lo": host_addresses()["lo"]}
    assert "127.0.0.1" in node["nic_addresses"]["lo"]


def test_without_a_mapping_there_are_no_nic_addresses(tmp_path: Path) -> None:
    with running_exporter(tmp_path, profile="a5-8") as ep, ep.sync_client() as client:
        node = client.get("/v1/node").json()
        chips = client.get("/v1/chips").json()["chips"]
    assert node["nic_addresses"] is None and node["npu_nics"] is None
    assert all(c["static"]["urma"][3]["eids"] == [f"0000000000000ac00000000014{c['phy_id']:02x}0105"] for c in chips)


def test_910b_chips_serve_no_urma(tmp_path: Path) -> None:
    with running_exporter(tmp_path) as ep, ep.sync_client() as client:
        chips = client.get("/v1/chips").json()["chips"]
    assert {json.dumps(c["static"]["urma"]) for c in chips} == {"null"}


def test_dcmi_backend_process_serves_the_950_urma_eids(
    dcmi_double_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = tmp_path / "double.conf"
    config.write_text(
        "rc dcmi_init * -8255\nchip 0 0 0 4\nchip 0 1 1 1\n"
        "str chip_name * Ascend950PR\nint board_id * 0x50\n"
        + "".join(f"urma 1 {i} {','.join(eids)}\n" for i, eids in enumerate(POD_PHY_1))
        + "rc dcmiv2_get_urma_device_cnt 0 -8005\n"
    )
    args = ("--library", str(dcmi_double_path))
    with (
        running_exporter(tmp_path / "run", *args, backend="dcmi", env={"DCMI_DOUBLE_CONFIG": str(config)}) as ep,
        ep.sync_client() as client,
    ):
        chips = client.get("/v1/chips").json()["chips"]
    assert [c["static"]["urma"] for c in chips] == [None, [{"index": i, "eids": e} for i, e in enumerate(POD_PHY_1)]]
    assert [c["state"] for c in chips] == ["ok", "ok"]  # an unread URMA list costs the chip nothing else
    assert any(e.get("event") == "urma devices unreadable" and e.get("logic_id") == 0 for e in ep.logs())
