"""Our encoder and renderers against vectors written by a real Go toolchain (contract section 6).

tests/golden/gojson_vectors.go marshals the reference's wire structs with Go >= 1.22 (its
version is recorded beside the output); every vector here is rebuilt through our public API from
the parsed document, with maps deliberately handed over in reverse order, and must come out
byte for byte. When a `go` binary is on PATH the program is run again to prove the committed
output is current.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from ascend_common.gojson import go_json
from fault_manager.deviceinfo.configmap import (
    UNWATCHED_SWITCH,
    ChipReport,
    FaultEntry,
    SwitchEvent,
    SwitchReport,
    UpgradeReason,
    check_code,
    device_info_cfg_json,
    fault_list_json,
    published_rack_id,
    render_device_info,
    switch_info_json,
    upgrade_reasons_json,
)
from fault_manager.hotreset.reset_config import RankEntry, render_reset_config

from tests.support.golang import go_version, run_go

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"
PROGRAM = GOLDEN / "gojson_vectors.go"
VECTORS = GOLDEN / "gojson_vectors.jsonl"
GO_VERSION = GOLDEN / "gojson_vectors.goversion"


def _load() -> list[dict[str, str]]:
    return [json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines()]


ALL = _load()


def _reversed(mapping: dict[str, Any]) -> dict[str, Any]:
    return dict(reversed(list(mapping.items())))


def _vectors(kind: str) -> list[dict[str, str]]:
    selected = [v for v in ALL if v["kind"] == kind]
    assert selected, f"no golden vectors of kind {kind}"
    return selected


def _ids(vectors: list[dict[str, str]]) -> list[str]:
    return [v["name"] for v in vectors]


def test_recorded_go_version_is_at_least_1_22() -> None:
    # \b and \f short escapes only exist since Go 1.22; older Go writes \u0008 / \u000c.
    match = re.search(r"go version go(\d+)\.(\d+)", GO_VERSION.read_text(encoding="utf-8"))
    assert match, "tests/golden/gojson_vectors.goversion must hold `go version` output"
    assert (int(match[1]), int(match[2])) >= (1, 22)


def test_vector_file_is_well_formed() -> None:
    names = [v["name"] for v in ALL]
    assert len(names) == len(set(names))
    for vector in ALL:
        assert set(vector) == {"name", "kind", "go_json", "sha256"}
        assert hashlib.sha256(vector["go_json"].encode("utf-8")).hexdigest() == vector["sha256"]


@pytest.mark.parametrize("vector", ALL, ids=_ids(ALL))
def test_encoder_reproduces_every_vector(vector: dict[str, str]) -> None:
    # json.loads keeps Go's field order and Go's (sorted) map order, so this isolates escaping.
    assert go_json(json.loads(vector["go_json"])) == vector["go_json"]


@pytest.mark.parametrize("vector", _vectors("string"), ids=_ids(_vectors("string")))
def test_strings(vector: dict[str, str]) -> None:
    text = json.loads(vector["go_json"])
    encoded = go_json(text)
    assert encoded == vector["go_json"]
    assert hashlib.sha256(encoded.encode("utf-8")).hexdigest() == vector["sha256"]


@pytest.mark.parametrize("vector", _vectors("device_info"), ids=_ids(_vectors("device_info")))
def test_check_code_of_device_info(vector: dict[str, str]) -> None:
    parsed = json.loads(vector["go_json"])
    device_list = parsed["DeviceList"]
    shuffled = {
        "UpdateTime": parsed["UpdateTime"],
        "DeviceList": None if device_list is None else _reversed(device_list),
    }
    assert check_code(shuffled) == vector["sha256"]


@pytest.mark.parametrize("vector", _vectors("device_info_cfg"), ids=_ids(_vectors("device_info_cfg")))
def test_device_info_cfg(vector: dict[str, str]) -> None:
    parsed = json.loads(vector["go_json"])
    info = parsed["DeviceInfo"]
    rendered = device_info_cfg_json(
        _reversed(info["DeviceList"]),
        update_time_s=info["UpdateTime"],
        super_pod_id=parsed["SuperPodID"],
        server_index=parsed["ServerIndex"],
        rack_id=parsed.get("RackID"),
    )
    assert rendered == vector["go_json"]
    assert check_code(info) == parsed["CheckCode"]


def _fault_entries(document: str) -> list[FaultEntry]:
    return [
        FaultEntry(
            fault_type=item["fault_type"],
            npu_name=item["npu_name"],
            level=item["fault_level"],
            codes=tuple(item["fault_code"].split(",")) if item["fault_code"] else (),
            time_and_level=_reversed(
                {code: (v["fault_time"], v["fault_level"]) for code, v in item["fault_time_and_level_map"].items()}
            ),
        )
        for item in json.loads(document)
    ]


@pytest.mark.parametrize("vector", _vectors("device_faults"), ids=_ids(_vectors("device_faults")))
def test_fault_list(vector: dict[str, str]) -> None:
    assert fault_list_json(_fault_entries(vector["go_json"])) == vector["go_json"]


@pytest.mark.parametrize("vector", _vectors("switch_info"), ids=_ids(_vectors("switch_info")))
def test_switch_info(vector: dict[str, str]) -> None:
    parsed = json.loads(vector["go_json"])
    events = []
    for text in parsed["FaultCode"]:
        e = json.loads(text)
        events.append(
            SwitchEvent(
                event_type=e["EventType"],
                assembled_fault_code=e["AssembledFaultCode"],
                peer_port_device=e["PeerPortDevice"],
                peer_port_id=e["PeerPortId"],
                switch_chip_id=e["SwitchChipId"],
                switch_port_id=e["SwitchPortId"],
                severity=e["Severity"],
                assertion=e["Assertion"],
                alarm_raised_time=e["AlarmRaisedTime"],
            )
        )
    report = SwitchReport(
        events=tuple(events),
        fault_level=parsed["FaultLevel"],
        node_status=parsed["NodeStatus"],
        time_and_level=_reversed(
            {k: (v["fault_time"], v["fault_level"]) for k, v in parsed["FaultTimeAndLevelMap"].items()}
        ),
    )
    assert switch_info_json(report, update_time_s=parsed["UpdateTime"]) == vector["go_json"]


def test_switch_info_of_a_950_node() -> None:
    [vector] = _vectors("switch_info_unwatched")
    assert switch_info_json(UNWATCHED_SWITCH, update_time_s=1718000000) == vector["go_json"]


@pytest.mark.parametrize("vector", _vectors("upgrade_reasons"), ids=_ids(_vectors("upgrade_reasons")))
def test_upgrade_reasons(vector: dict[str, str]) -> None:
    parsed = json.loads(vector["go_json"])
    reasons = {
        chip: [
            UpgradeReason(r["upgrade_time"], r["fault_code"], r["fault_level"], r["upgrade_type"])
            for r in reversed(items)
        ]
        for chip, items in _reversed(parsed).items()
    }
    assert upgrade_reasons_json(reasons) == vector["go_json"]


@pytest.mark.parametrize("vector", _vectors("reset_info"), ids=_ids(_vectors("reset_info")))
def test_reset_info(vector: dict[str, str]) -> None:
    parsed = json.loads(vector["go_json"])
    ranks = [
        RankEntry(
            rank_id=r["RankId"],
            logic_id=r["LogicId"],
            status=r["Status"],
            policy=r["Policy"],
            initial_policy=r["InitialPolicy"],
            # Rebuild ErrorCodeHex from integers, as the reference does.
            error_codes=tuple(int(code, 16) for code in r["ErrorCodeHex"].split(",")) if r["ErrorCodeHex"] else (),
        )
        for r in parsed["RankList"]
    ]
    data = render_reset_config(
        ranks,
        update_time_s=parsed["UpdateTime"],
        retry_time=parsed["RetryTime"],
        fault_flushing=parsed["FaultFlushing"],
        graceful_exit=parsed["GracefulExit"],
        restart_fault_process=parsed["RestartFaultProcess"],
    )
    assert data["reset.json"] == vector["go_json"]
    assert data["checkCode"] == vector["sha256"]
    assert data["restartType"] == "hotReset"


def _golden(name: str) -> dict[str, str]:
    return next(v for v in ALL if v["name"] == name)


def test_render_910_node_end_to_end() -> None:
    """The same node as renderVectors() in the Go program, through render_device_info."""
    vector = _golden("render_910")
    faults_910 = _fault_entries(_golden("faults_910")["go_json"])
    chip3 = tuple(f for f in faults_910 if f.npu_name == "Ascend910-3")
    chip10 = tuple(f for f in faults_910 if f.npu_name == "Ascend910-10")
    chips = [
        ChipReport("Ascend910-0", healthy=True),
        ChipReport("Ascend910-1", healthy=True, in_use=True),
        ChipReport("Ascend910-2", healthy=True),
        # card entry first here: the renderer must put the network entry first, as the reference
        ChipReport("Ascend910-3", healthy=False, network_unhealthy=True, faults=tuple(reversed(chip3))),
        ChipReport("Ascend910-10", healthy=False, recovering=True, faults=chip10),
        ChipReport("Ascend910-11", healthy=True),
    ]
    data = render_device_info(
        "Ascend910", chips, update_time_s=1718000000, super_pod_id=2, server_index=5, manually_separated=()
    )
    assert data["DeviceInfoCfg"] == vector["go_json"]


def test_render_310_node_end_to_end() -> None:
    vector = _golden("render_310")
    chips = [
        ChipReport("Ascend310-0", healthy=True),
        ChipReport(
            "Ascend310-1",
            healthy=False,
            faults=(
                FaultEntry(
                    "CardUnhealthy",
                    "Ascend310-1",
                    "SeparateNPU",
                    ("40F84E00",),
                    {"40F84E00": (1718000000000, "SeparateNPU")},
                ),
            ),
        ),
    ]
    data = render_device_info("Ascend310", chips, update_time_s=1718000000)
    assert data["DeviceInfoCfg"] == vector["go_json"]


def test_render_950_pod_node_end_to_end() -> None:
    """The 950 node of renderVectors(): huawei.com/npu keys, npu-<phy> names, RackID, SwitchInfoCfg."""
    faults = _fault_entries(
        json.loads(_golden("render_a5")["go_json"])["DeviceInfo"]["DeviceList"]["huawei.com/npu-Fault"]
    )
    chip6 = tuple(f for f in faults if f.npu_name == "npu-6")
    chip1 = tuple(f for f in faults if f.npu_name == "npu-1")
    chips = [  # by logic id: phy = logic + 4 mod 8
        ChipReport("npu-4", healthy=True),
        ChipReport("npu-5", healthy=True, in_use=True),
        ChipReport("npu-6", healthy=False, network_unhealthy=True, faults=tuple(reversed(chip6))),
        ChipReport("npu-7", healthy=True),
        ChipReport("npu-0", healthy=True),
        ChipReport("npu-1", healthy=False, recovering=True, faults=chip1),
        ChipReport("npu-2", healthy=True),
        ChipReport("npu-3", healthy=True),
    ]
    data = render_device_info(
        "npu", chips, update_time_s=1718000000, super_pod_id=5, server_index=1,
        rack_id=published_rack_id("npu", 2, 3), switch=UNWATCHED_SWITCH,
    )  # fmt: skip
    assert data["DeviceInfoCfg"] == _golden("render_a5")["go_json"]
    assert data["SwitchInfoCfg"] == _golden("switch_unwatched")["go_json"]


def test_committed_vectors_are_current(tmp_path: Path) -> None:
    if go_version(tmp_path) < (1, 22):
        pytest.skip("the `go` on PATH is older than 1.22, whose escaping the vectors follow")
    assert run_go(PROGRAM, tmp_path) == VECTORS.read_text(encoding="utf-8"), (
        "tests/golden/gojson_vectors.jsonl is stale: regenerate it with the command in gojson_vectors.go"
    )
