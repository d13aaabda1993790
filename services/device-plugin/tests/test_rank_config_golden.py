"""The rank configuration (`ascend-910-configuration`, `ascend-npu-configuration`) against vectors
written by a real Go toolchain from the reference's structs (tests/golden/rank_config_vectors.go:
proto.go Instance / Device, field order, json tags, omitempty; the 950's levelList).

Each vector is rebuilt here through our public API from the same facts and must come out byte for
byte. When a `go` binary is on PATH the program is run again to prove the committed output is
current.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from ascend_common.chips import ChipFamily, ResourceType
from ascend_device_plugin.allocation.annotations import ConfigDevice, config_devices, device_configuration
from ascend_device_plugin.model.chip_pod import ChipInfo

from tests.support.golang import run_go

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"
PROGRAM = GOLDEN / "rank_config_vectors.go"
VECTORS = GOLDEN / "rank_config_vectors.jsonl"
GO_VERSION = GOLDEN / "rank_config_vectors.goversion"

ALL = {v["name"]: v for v in (json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines())}


def a5_chip(logic: int, phy: int, sdid: int | None) -> ChipInfo:
    return ChipInfo(
        logic_id=logic, phy_id=phy, card_id=-1, name=f"npu-{phy}", rtype=ResourceType.NPU,
        family=ChipFamily.ASCEND950, aicore=25, healthy=True, super_device_id=sdid,
    )  # fmt: skip


def a910_chip(phy: int, ip: str | None) -> ChipInfo:
    return ChipInfo(
        logic_id=phy, phy_id=phy, card_id=phy, name=f"Ascend910-{phy}", rtype=ResourceType.ASCEND910,
        family=ChipFamily.ASCEND910B, aicore=20, healthy=True, device_ip=ip,
    )  # fmt: skip


def rebuild(name: str) -> str:
    """Our value for the vector `name`, from the facts the Go program restates."""
    match name:
        case "ascend910_physical":
            chips = {0: a910_chip(0, "192.168.100.1"), 1: a910_chip(1, None)}
            devices, vnpu = config_devices(["Ascend910-9", "Ascend910-1", "Ascend910-0"], chips)
            return device_configuration(
                "train-0", "7b1c-uid", "10.0.0.5", devices, vnpu=vnpu, server_index="-1", server_ip="10.0.0.5"
            )
        case "a3_super_pod":
            devices_a3 = [ConfigDevice(10, "10.2.0.10", 1 << 22 | 10), ConfigDevice(2, "10.2.0.2", 1 << 22 | 2)]
            return device_configuration(
                "job-w-1", "u", "10.0.0.6", devices_a3, vnpu=False, super_pod_id=3, server_index="1",
                server_ip="10.0.0.6",
            )  # fmt: skip
        case "vnpu":
            devices, vnpu = config_devices(["Ascend910-4c-100-0"], {0: a910_chip(0, "192.168.1.1")})
            return device_configuration("infer", "u", "h", devices, vnpu=vnpu)
        case "no_devices":
            return device_configuration("p", "u", "h", [], vnpu=False)
        case "a5_super_pod":
            chips = {4: a5_chip(0, 4, 1 << 22 | 4), 5: a5_chip(1, 5, 1 << 22 | 5)}
            devices, vnpu = config_devices(["npu-5", "npu-4"], chips)
            return device_configuration(
                "job-0", "uid-0", "10.0.0.5", devices, vnpu=vnpu, super_pod_id=5, rack_id=3, server_index="1",
                server_ip="10.0.0.5",
            )  # fmt: skip
        case "a5_server":
            devices, vnpu = config_devices(["npu-0"], {0: a5_chip(2, 0, None)})
            return device_configuration(
                "job-1", "uid-1", "10.0.0.7", devices, vnpu=vnpu, server_index="-1", server_ip="10.0.0.7"
            )
        case "escaping_and_bounds":
            return device_configuration(
                "a<b>&c\u2028é", '"quoted"\\', "", [ConfigDevice(7, "", 2**32 - 1)], vnpu=False,
                super_pod_id=-(2**31), rack_id=2**31 - 1, server_index="-2",
            )  # fmt: skip
    raise AssertionError(f"no rebuild for vector {name}")


def test_vector_file_is_well_formed() -> None:
    assert len(ALL) == len(VECTORS.read_text(encoding="utf-8").splitlines())
    for vector in ALL.values():
        assert set(vector) == {"name", "kind", "go_json", "sha256"} and vector["kind"] == "rank_config"
        assert hashlib.sha256(vector["go_json"].encode("utf-8")).hexdigest() == vector["sha256"]
    assert re.match(r"go version go1\.\d+", GO_VERSION.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(ALL))
def test_rank_configuration_matches_go(name: str) -> None:
    assert rebuild(name) == ALL[name]["go_json"]


def test_field_order_is_the_go_structs() -> None:
    instance = json.loads(ALL["a5_super_pod"]["go_json"])
    assert list(instance) == [
        "pod_name", "server_id", "host_ip", "super_pod_id", "devices", "rack_id", "server_index", "server_ip",
    ]  # fmt: skip
    # These chips have no rank levels: the 950 device is written as the reference writes one without (omitempty).
    assert [list(d) for d in instance["devices"]] == [["device_id", "device_ip", "super_device_id"]] * 2


def test_committed_vectors_are_current(tmp_path: Path) -> None:
    assert run_go(PROGRAM, tmp_path) == VECTORS.read_text(encoding="utf-8"), (
        "tests/golden/rank_config_vectors.jsonl is stale: regenerate it with the command in rank_config_vectors.go"
    )
