"""The device-info ConfigMap renderer, rule by rule (contract section 6).

Expected strings are written out by hand from the reference's structs and managers (see the
module docstring of fault_manager.deviceinfo.configmap); test_deviceinfo_golden.py checks the same
renderer against output of a real Go toolchain.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from fault_manager.deviceinfo.configmap import (
    DESCRIPTION,
    ChipReport,
    FaultEntry,
    SwitchEvent,
    SwitchReport,
    UpgradeReason,
    check_code,
    device_info_cfg_json,
    device_list,
    fault_list_json,
    parse_manually_separated,
    render_device_info,
    switch_info_json,
    upgrade_reasons_json,
)

T = 1718000000


def _cfg(data: dict[str, str]) -> Any:
    return json.loads(data["DeviceInfoCfg"])


def _list(data: dict[str, str]) -> dict[str, str]:
    result: dict[str, str] = _cfg(data)["DeviceInfo"]["DeviceList"]
    return result


# --- DeviceList keys per resource type ---------------------------------------------------------


def _chips(rtype: str) -> list[ChipReport]:
    return [
        ChipReport(f"{rtype}-0", healthy=True),
        ChipReport(f"{rtype}-1", healthy=False),
    ]


@pytest.mark.parametrize(
    ("rtype", "keys"),
    [
        (
            "Ascend910",
            [
                "huawei.com/Ascend910",
                "huawei.com/Ascend910-Fault",
                "huawei.com/Ascend910-NetworkUnhealthy",
                "huawei.com/Ascend910-Recovering",
                "huawei.com/Ascend910-Unhealthy",
            ],
        ),
        (
            "npu",
            [
                "huawei.com/npu",
                "huawei.com/npu-Fault",
                "huawei.com/npu-NetworkUnhealthy",
                "huawei.com/npu-Recovering",
                "huawei.com/npu-Unhealthy",
            ],
        ),
        ("Ascend310P", ["huawei.com/Ascend310P", "huawei.com/Ascend310P-Fault", "huawei.com/Ascend310P-Unhealthy"]),
        # The reference's 310 manager writes its faults under the 310P key.
        ("Ascend310", ["huawei.com/Ascend310", "huawei.com/Ascend310-Unhealthy", "huawei.com/Ascend310P-Fault"]),
    ],
)
def test_device_list_keys_per_type(rtype: str, keys: list[str]) -> None:
    data = render_device_info(rtype, _chips(rtype), update_time_s=T)
    assert list(_list(data)) == keys  # sorted, as Go writes map keys


def test_310_fault_key_quirk_even_with_faults() -> None:
    chips = [
        ChipReport("Ascend310-2", healthy=False, faults=(FaultEntry("CardUnhealthy", "Ascend310-2", "SeparateNPU"),))
    ]
    entries = device_list("Ascend310", chips)
    assert "huawei.com/Ascend310-Fault" not in entries
    assert json.loads(entries["huawei.com/Ascend310P-Fault"])[0]["npu_name"] == "Ascend310-2"


@pytest.mark.parametrize(
    ("rtype", "network_keys", "present"),
    [
        ("Ascend910", None, True),
        ("Ascend910", False, False),
        ("Ascend310P", None, False),
        ("Ascend310P", True, True),
        ("npu", None, True),
    ],
)
def test_network_key_follows_family_unless_overridden(rtype: str, network_keys: bool | None, present: bool) -> None:
    chips = [ChipReport(f"{rtype}-0", healthy=True, network_unhealthy=True)]
    entries = device_list(rtype, chips, network_keys=network_keys)
    key = f"huawei.com/{rtype}-NetworkUnhealthy"
    assert (key in entries) is present
    if present:
        assert entries[key] == f"{rtype}-0"


def test_recovering_key_for_310p_appears_only_while_resetting() -> None:
    idle = device_list("Ascend310P", [ChipReport("Ascend310P-0", healthy=True)])
    assert "huawei.com/Ascend310P-Recovering" not in idle
    resetting = device_list("Ascend310P", [ChipReport("Ascend310P-0", healthy=False, recovering=True)])
    assert resetting["huawei.com/Ascend310P-Recovering"] == "Ascend310P-0"


def test_lists_are_sorted_bytewise_and_empty_lists_are_written() -> None:
    chips = [
        ChipReport("Ascend910-2", healthy=True),
        ChipReport("Ascend910-10", healthy=True),
        ChipReport("Ascend910-1", healthy=True),
        ChipReport("Ascend910-11", healthy=True, in_use=True),
    ]
    entries = device_list("Ascend910", chips)
    # sets.String.List() sorts strings: -10 before -2
    assert entries["huawei.com/Ascend910"] == "Ascend910-1,Ascend910-10,Ascend910-2"
    assert entries["huawei.com/Ascend910-Unhealthy"] == ""
    assert entries["huawei.com/Ascend910-NetworkUnhealthy"] == ""
    assert entries["huawei.com/Ascend910-Recovering"] == ""
    assert entries["huawei.com/Ascend910-Fault"] == "[]"


@pytest.mark.parametrize(
    ("chip", "free", "unhealthy"),
    [
        (ChipReport("Ascend910-0", healthy=True), "Ascend910-0", ""),
        (ChipReport("Ascend910-0", healthy=True, in_use=True), "", ""),  # used by a pod: not free
        (ChipReport("Ascend910-0", healthy=False), "", "Ascend910-0"),
        (ChipReport("Ascend910-0", healthy=False, in_use=True), "", "Ascend910-0"),
        (ChipReport("Ascend910-0", healthy=True, network_unhealthy=True), "Ascend910-0", ""),  # network: own key
    ],
)
def test_free_and_unhealthy(chip: ChipReport, free: str, unhealthy: str) -> None:
    entries = device_list("Ascend910", [chip])
    assert entries["huawei.com/Ascend910"] == free
    assert entries["huawei.com/Ascend910-Unhealthy"] == unhealthy


# --- the -Fault array --------------------------------------------------------------------------


def test_fault_object_field_order_and_values() -> None:
    entry = FaultEntry(
        "CardUnhealthy",
        "Ascend910-3",
        "RestartNPU",
        codes=("80e01801", "8C1FA006", "80E01801", "020001002"),
        time_and_level={"8c1fa006": (5, "NotHandleFault"), "80E01801": (7, "RestartNPU")},
    )
    assert fault_list_json([entry]) == (
        '[{"fault_type":"CardUnhealthy","npu_name":"Ascend910-3","large_model_fault_level":"RestartNPU",'
        '"fault_level":"RestartNPU","fault_handling":"RestartNPU","fault_code":"80E01801,8C1FA006,020001002",'
        '"fault_time_and_level_map":{"80E01801":{"fault_time":7,"fault_level":"RestartNPU"},'
        '"8C1FA006":{"fault_time":5,"fault_level":"NotHandleFault"}}}]'
    )


def test_unhealthy_chip_without_codes() -> None:
    entry = FaultEntry("CardUnhealthy", "Ascend910-0", "SeparateNPU")
    parsed = json.loads(fault_list_json([entry]))
    assert parsed == [
        {
            "fault_type": "CardUnhealthy",
            "npu_name": "Ascend910-0",
            "large_model_fault_level": "SeparateNPU",
            "fault_level": "SeparateNPU",
            "fault_handling": "SeparateNPU",
            "fault_code": "",
            "fault_time_and_level_map": {},
        }
    ]


def test_faults_in_chip_order_network_entry_first() -> None:
    card = FaultEntry("CardUnhealthy", "Ascend910-5", "RestartNPU", ("80E01801",))
    net = FaultEntry("CardNetworkUnhealthy", "Ascend910-5", "PreSeparateNPU", ("81078603",))
    other = FaultEntry("CardUnhealthy", "Ascend910-1", "SeparateNPU")
    chips = [
        ChipReport("Ascend910-5", healthy=False, network_unhealthy=True, faults=(card, net)),
        ChipReport("Ascend910-1", healthy=False, faults=(other,)),
    ]
    faults = json.loads(device_list("Ascend910", chips)["huawei.com/Ascend910-Fault"])
    assert [(f["npu_name"], f["fault_type"]) for f in faults] == [
        ("Ascend910-5", "CardNetworkUnhealthy"),
        ("Ascend910-5", "CardUnhealthy"),
        ("Ascend910-1", "CardUnhealthy"),
    ]


@pytest.mark.parametrize(
    "entry",
    [
        FaultEntry("Unhealthy", "Ascend910-0", "RestartNPU"),  # type: ignore[arg-type]
        FaultEntry("CardUnhealthy", "Ascend910-0", "Broken"),
        FaultEntry("CardUnhealthy", "Ascend910-0", "RestartNPU", codes=("XYZ",)),
        FaultEntry("CardUnhealthy", "Ascend910-0", "RestartNPU", codes=("1234567890",)),  # > 9 hex digits
        FaultEntry("CardUnhealthy", "Ascend910-0", "RestartNPU", time_and_level={"80E01801": (1, "Nope")}),
        FaultEntry("CardUnhealthy", "Ascend910-0", "RestartNPU", time_and_level={"80E01801": (2**63, "RestartNPU")}),
    ],
)
def test_bad_fault_entries_are_rejected(entry: FaultEntry) -> None:
    with pytest.raises((ValueError, TypeError)):
        fault_list_json([entry])


def test_two_entries_of_one_kind_for_a_chip_are_rejected() -> None:
    entry = FaultEntry("CardUnhealthy", "Ascend910-0", "RestartNPU")
    with pytest.raises(ValueError, match="at most one"):
        device_list("Ascend910", [ChipReport("Ascend910-0", healthy=False, faults=(entry, entry))])


# --- DeviceInfoCfg -----------------------------------------------------------------------------


def test_device_info_cfg_golden_string() -> None:
    chips = [ChipReport("Ascend310P-0", healthy=True), ChipReport("Ascend310P-1", healthy=True, in_use=True)]
    cfg = render_device_info("Ascend310P", chips, update_time_s=T)["DeviceInfoCfg"]
    device_info = (
        '{"DeviceList":{"huawei.com/Ascend310P":"Ascend310P-0","huawei.com/Ascend310P-Fault":"[]",'
        '"huawei.com/Ascend310P-Unhealthy":""},"UpdateTime":1718000000}'
    )
    code = hashlib.sha256(device_info.encode()).hexdigest()
    assert cfg == f'{{"DeviceInfo":{device_info},"SuperPodID":-1,"ServerIndex":-1,"CheckCode":"{code}"}}'


@pytest.mark.parametrize(
    ("rack_id", "order"),
    [
        (None, ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode"]),
        (0, ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode", "RackID"]),  # a nil pointer only is omitted
        (12, ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode", "RackID"]),
    ],
)
def test_field_order_and_rack_id_only_when_given(rack_id: int | None, order: list[str]) -> None:
    data = render_device_info("Ascend910", [], update_time_s=T, super_pod_id=3, server_index=9, rack_id=rack_id)
    cfg = _cfg(data)
    assert list(cfg) == order
    assert list(cfg["DeviceInfo"]) == ["DeviceList", "UpdateTime"]
    assert (cfg["SuperPodID"], cfg["ServerIndex"]) == (3, 9)
    assert cfg.get("RackID") == rack_id


def test_check_code_is_sha256_of_the_device_info_bytes_as_written() -> None:
    chips = [
        ChipReport("Ascend910-0", healthy=False, faults=(FaultEntry("CardUnhealthy", "Ascend910-0", "SeparateNPU"),))
    ]
    text = render_device_info("Ascend910", chips, update_time_s=T)["DeviceInfoCfg"]
    inner = text[len('{"DeviceInfo":') : text.index(',"SuperPodID"')]
    cfg = json.loads(text)
    assert cfg["CheckCode"] == hashlib.sha256(inner.encode()).hexdigest()
    assert check_code(cfg["DeviceInfo"]) == cfg["CheckCode"]
    tampered = dict(cfg["DeviceInfo"], UpdateTime=T + 1)
    assert check_code(tampered) != cfg["CheckCode"]


def test_check_code_escapes_like_go() -> None:
    info = {"DeviceList": {"k": "<>&\u2028\u2029é中"}, "UpdateTime": 1}
    expected = '{"DeviceList":{"k":"\\u003c\\u003e\\u0026\\u2028\\u2029é中"},"UpdateTime":1}'
    assert check_code(info) == hashlib.sha256(expected.encode()).hexdigest()


def test_check_code_reads_like_json_unmarshal() -> None:
    reference = check_code({"DeviceList": {"a": "1", "b": "2"}, "UpdateTime": 5})
    assert check_code({"UpdateTime": 5, "Extra": True, "DeviceList": {"b": "2", "a": "1"}}) == reference
    null_list = hashlib.sha256(b'{"DeviceList":null,"UpdateTime":0}').hexdigest()
    assert check_code({}) == null_list


@pytest.mark.parametrize(
    "info",
    [
        {"DeviceList": {"a": 1}, "UpdateTime": 1},
        {"DeviceList": ["a"], "UpdateTime": 1},
        {"DeviceList": {}, "UpdateTime": "1"},
        {"DeviceList": {}, "UpdateTime": True},
    ],
)
def test_check_code_rejects_what_go_cannot_unmarshal(info: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        check_code(info)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"super_pod_id": 2**31},
        {"server_index": -(2**31) - 1},
        {"rack_id": 2**31},
        {"update_time_s": True},
        {"update_time_s": 1.5},
    ],
)
def test_out_of_range_or_mistyped_numbers_are_rejected(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"update_time_s": T} | kwargs
    with pytest.raises((ValueError, TypeError)):
        device_info_cfg_json({}, **args)


def test_unknown_type_and_duplicate_chips_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown resource type"):
        render_device_info("Ascend910B", [], update_time_s=T)
    with pytest.raises(ValueError, match="Ascend910-1"):
        render_device_info(
            "Ascend910",
            [ChipReport("Ascend910-1", healthy=True), ChipReport("Ascend910-1", healthy=False)],
            update_time_s=T,
        )


# --- the other data keys -----------------------------------------------------------------------


def test_data_keys_without_and_with_switch() -> None:
    plain = render_device_info("Ascend910", [], update_time_s=T)
    assert set(plain) == {"DeviceInfoCfg", "ManuallySeparateNPU", "UpgradeFaultReason", "Description"}
    assert plain["ManuallySeparateNPU"] == ""
    assert plain["UpgradeFaultReason"] == "{}"
    assert plain["Description"] == DESCRIPTION
    a3 = render_device_info("Ascend910", [], update_time_s=T, switch=SwitchReport(), description="x")
    assert set(a3) == set(plain) | {"SwitchInfoCfg"}
    assert a3["Description"] == "x"


def test_description_is_the_reference_text() -> None:
    assert DESCRIPTION.startswith("The field[xxx.com/xxx] is sunset.")
    assert DESCRIPTION.endswith("'self-maintain-available-card'")


def test_manually_separated_written_in_given_order_without_duplicates() -> None:
    data = render_device_info(
        "Ascend910", [], update_time_s=T, manually_separated=["Ascend910-3", "Ascend910-0", "Ascend910-3"]
    )
    assert data["ManuallySeparateNPU"] == "Ascend910-3,Ascend910-0"
    with pytest.raises(ValueError, match="Ascend910-x"):
        render_device_info("Ascend910", [], update_time_s=T, manually_separated=["Ascend910-x"])


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("", []),
        ("   ", []),
        ("Ascend910-0", ["Ascend910-0"]),
        ("Ascend910-0,Ascend910-3", ["Ascend910-0", "Ascend910-3"]),
        (" Ascend910-3 , ,Ascend910-0,", ["Ascend910-3", "Ascend910-0"]),
        ("Ascend910-1,Ascend910-1", ["Ascend910-1"]),
        ("Ascend310P-7,npu-15,Ascend310-2", ["Ascend310P-7", "npu-15", "Ascend310-2"]),
    ],
)
def test_parse_manually_separated(value: str, names: list[str]) -> None:
    assert parse_manually_separated(value) == names


@pytest.mark.parametrize(
    ("value", "bad"),
    [
        ("Ascend910-x", ["Ascend910-x"]),
        ("Ascend910-0,foo,Ascend910-1;Ascend910-2", ["foo", "Ascend910-1;Ascend910-2"]),
        ("Ascend910-2c-100-0", ["Ascend910-2c-100-0"]),  # a vNPU is not a chip
        ("ascend910-0", ["ascend910-0"]),
        ("Ascend910 -0", ["Ascend910 -0"]),
    ],
)
def test_parse_manually_separated_names_every_malformed_item(value: str, bad: list[str]) -> None:
    with pytest.raises(ValueError, match="malformed chip names") as excinfo:
        parse_manually_separated(value)
    for name in bad:
        assert repr(name) in str(excinfo.value)


def test_upgrade_reasons_shape_and_order() -> None:
    reasons = {
        "Ascend910-3": [
            UpgradeReason(20, "AutofillFaultCode", "ManuallySeparateNPU", "FaultAutofill"),
            UpgradeReason(10, "81078603", "PreSeparateNPU", "FaultDuration"),
        ],
        "Ascend910-10": [UpgradeReason(5, "80E01801", "ManuallySeparateNPU", "FaultFrequency")],
        "Ascend910-4": [],
    }
    assert upgrade_reasons_json(reasons) == (
        '{"Ascend910-10":[{"upgrade_time":5,"fault_code":"80E01801","fault_level":"ManuallySeparateNPU",'
        '"upgrade_type":"FaultFrequency"}],'
        '"Ascend910-3":[{"upgrade_time":10,"fault_code":"81078603","fault_level":"PreSeparateNPU",'
        '"upgrade_type":"FaultDuration"},{"upgrade_time":20,"fault_code":"AutofillFaultCode",'
        '"fault_level":"ManuallySeparateNPU","upgrade_type":"FaultAutofill"}]}'
    )
    data = render_device_info("Ascend910", [], update_time_s=T, upgrade_reasons=reasons)
    assert data["UpgradeFaultReason"] == upgrade_reasons_json(reasons)


@pytest.mark.parametrize(
    ("reasons", "message"),
    [
        ({"Ascend910-3": [UpgradeReason(1, "80E01801", "SeparateNPU", "FaultSomething")]}, "upgrade type"),
        # Any non-empty level is written as it is (the reference's TestCmToString writes "critical"):
        # a reason read from a reference-written ConfigMap goes back unchanged.
        ({"Ascend910-3": [UpgradeReason(1, "80E01801", "", "FaultDuration")]}, "empty fault level"),
        ({"chip-3": [UpgradeReason(1, "80E01801", "SeparateNPU", "FaultDuration")]}, "malformed chip names"),
    ],
)
def test_bad_upgrade_reasons_are_rejected(reasons: dict[str, list[UpgradeReason]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        upgrade_reasons_json(reasons)


# --- SwitchInfoCfg -----------------------------------------------------------------------------


def test_switch_info_shape() -> None:
    event = SwitchEvent(1, "[0x00f103b0,155904,na,na]", 0, 0, 1, 4, 2, 1, 1718000000789)
    report = SwitchReport(
        events=(event,),
        fault_level="SubHealthFault",
        node_status="SubHealthy",
        time_and_level={"[0x00f103b0,155904,na,na]_1_4": (1718000000789, "SubHealthFault")},
    )
    text = switch_info_json(report, update_time_s=T)
    parsed = json.loads(text)
    assert list(parsed) == ["FaultCode", "FaultLevel", "UpdateTime", "NodeStatus", "FaultTimeAndLevelMap"]
    assert parsed["FaultCode"] == [
        '{"EventType":1,"AssembledFaultCode":"[0x00f103b0,155904,na,na]","PeerPortDevice":0,"PeerPortId":0,'
        '"SwitchChipId":1,"SwitchPortId":4,"Severity":2,"Assertion":1,"AlarmRaisedTime":1718000000789}'
    ]
    assert parsed["FaultTimeAndLevelMap"] == {
        "[0x00f103b0,155904,na,na]_1_4": {"fault_time": 1718000000789, "fault_level": "SubHealthFault"}
    }
    assert (parsed["FaultLevel"], parsed["UpdateTime"], parsed["NodeStatus"]) == ("SubHealthFault", T, "SubHealthy")


def test_switch_info_without_faults() -> None:
    assert switch_info_json(SwitchReport(), update_time_s=T) == (
        '{"FaultCode":[],"FaultLevel":"NotHandle","UpdateTime":1718000000,"NodeStatus":"Healthy","FaultTimeAndLevelMap":{}}'
    )
    data = render_device_info("Ascend910", [], update_time_s=T, switch=SwitchReport())
    assert data["SwitchInfoCfg"] == switch_info_json(SwitchReport(), update_time_s=T)


@pytest.mark.parametrize(
    "report",
    [
        SwitchReport(fault_level="Critical"),
        SwitchReport(node_status="Sick"),
        SwitchReport(events=(SwitchEvent(-1, "x", 0, 0, 0, 0, 0, 0, 0),)),  # uint field
    ],
)
def test_bad_switch_reports_are_rejected(report: SwitchReport) -> None:
    with pytest.raises((ValueError, TypeError)):
        switch_info_json(report, update_time_s=T)
