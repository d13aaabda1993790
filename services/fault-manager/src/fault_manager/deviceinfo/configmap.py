"""The device-info ConfigMap `kube-system/mindx-dl-deviceinfo-<node>` (contract section 6), rendered.

Pure: callers pass what they know about the node's chips and get the ConfigMap `data` back,
byte for byte what the reference Ascend Device Plugin writes. ClusterD and Volcano parse these
strings and ClusterD drops a ConfigMap whose CheckCode does not match, so every JSON value goes
through ascend_common.gojson (Go's encoding/json: struct field order, sorted map keys, HTML-safe
escaping).

Reference (MindCluster, component/ascend-device-plugin):
- pkg/common/proto.go: NodeDeviceInfoCache {DeviceInfo, SuperPodID int32, ServerIndex int32,
  CheckCode string, RackID *int32 `json:"RackID,omitempty"`}; NodeDeviceInfo {DeviceList
  map[string]string, UpdateTime int64}; DeviceFault and FaultTimeAndLevel (snake_case tags);
  SwitchFaultInfo {FaultCode []string, FaultLevel, UpdateTime int64, NodeStatus,
  FaultTimeAndLevelMap} (no tags).
- pkg/kubeclient/client_server.go WriteDeviceInfoDataIntoCM: CheckCode = MakeDataHash(DeviceInfo)
  (pkg/common/common.go: hex sha256 of json.Marshal); data keys DeviceInfoCfg,
  ManuallySeparateNPU, UpgradeFaultReason, Description (+ SwitchInfoCfg on A3/A5).
- pkg/device/ascend910.go, ascend310p.go, ascend310.go updateDeviceInfo: which DeviceList keys
  each family writes; every list is sets.String.List() (byte-wise sorted) joined with ",", and
  written even when empty; the -Fault array is json.Marshal of a non-nil slice ("[]" when empty).
- pkg/common/constants.go: HuaweiFaultCodeAscend310 = HuaweiAscend310P + "-Fault" (the 310 quirk);
  DescriptionValue.
- pkg/device/ascendcommon.go getDeviceFaults: per chip the CardNetworkUnhealthy entry comes before
  the CardUnhealthy entry; codes are strings.ToUpper(FormatFaultCodeHex(code)), the policy's spelling.
- pkg/common/upgradefault.go: UpgradeFaultReason {upgrade_time, fault_code, fault_level,
  upgrade_type} (the key struct is embedded, so its fields are flattened).
- pkg/common/common.go getSimpleSwitchFaultStr: the switch event written into FaultCode.
- The 950 (A5) generation (RealCardType Ascend910A5): the 910 manager under `huawei.com/npu`
  (pkg/common/device.go GetAscend910Key), chips named `npu-<phy>` everywhere, ManuallySeparateNPU
  included (pkg/next/devicefactory/customname ReplaceDeviceInfoPublicName rewrites `Ascend910-`);
  pkg/device/ascendcommon.go getNodeDeviceInfoCache: RackID for a 1D / 2D pod only;
  pkg/common/device.go GetSwitchFaultInfo: SwitchInfoCfg is Go's zero SwitchFaultInfo there.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from ascend_common.chips import RESOURCE_PREFIX, ResourceType
from ascend_common.faults.levels import FaultLevel
from ascend_common.faults.table import MAX_CODE_DIGITS, is_plain_hex, normalize_code
from ascend_common.gojson import INT32, INT64, UINT64, GoJSON, go_int_field, go_json, go_map
from ascend_common.jsonin import InputError, loads_bounded
from ascend_common.products import is_pod_scene

__all__ = [
    "DATA_KEYS",
    "DESCRIPTION",
    "DESCRIPTION_KEY",
    "DEVICE_INFO_KEY",
    "MANUALLY_SEPARATE_KEY",
    "SWITCH_INFO_KEY",
    "UNWATCHED_SWITCH",
    "UPGRADE_REASON_KEY",
    "ChipReport",
    "FaultEntry",
    "SwitchEvent",
    "SwitchReport",
    "UnwatchedSwitch",
    "UpgradeReason",
    "check_code",
    "device_info_cfg_json",
    "device_list",
    "fault_list_json",
    "parse_manually_separated",
    "parse_upgrade_reasons",
    "published_rack_id",
    "render_device_info",
    "switch_info_json",
    "upgrade_reasons_json",
]

DEVICE_INFO_KEY: Final = "DeviceInfoCfg"
MANUALLY_SEPARATE_KEY: Final = "ManuallySeparateNPU"
UPGRADE_REASON_KEY: Final = "UpgradeFaultReason"
DESCRIPTION_KEY: Final = "Description"
SWITCH_INFO_KEY: Final = "SwitchInfoCfg"
DATA_KEYS: Final = (DEVICE_INFO_KEY, MANUALLY_SEPARATE_KEY, UPGRADE_REASON_KEY, DESCRIPTION_KEY, SWITCH_INFO_KEY)

# The reference writes this fixed text (pkg/common/constants.go DescriptionValue); a drop-in
# replacement writes it too, so that tools diffing the ConfigMap see no change.
DESCRIPTION: Final = (
    "The field[xxx.com/xxx] is sunset. Volcano has the ability to maintain the usage status of "
    "chips on its own, and can temporarily use this field by configuring the Volcano parameter "
    "'self-maintain-available-card'"
)

RESOURCE_TYPES: Final = frozenset({"Ascend910", "Ascend310P", "Ascend310", "npu"})
# The 910 family (910A/B/A3 as Ascend910, the 950 generation as npu) shares the reference's 910
# manager, the only one that writes -NetworkUnhealthy and -Recovering.
_FAMILY_910: Final = frozenset({"Ascend910", "npu"})

FaultType = Literal["CardUnhealthy", "CardNetworkUnhealthy"]
CARD_UNHEALTHY: Final = "CardUnhealthy"
CARD_NETWORK_UNHEALTHY: Final = "CardNetworkUnhealthy"
_FAULT_TYPES: Final = (CARD_NETWORK_UNHEALTHY, CARD_UNHEALTHY)  # the reference's order within a chip

UPGRADE_TYPES: Final = frozenset({"FaultDuration", "FaultFrequency", "FaultAutofill"})
SWITCH_FAULT_LEVELS: Final = frozenset({"NotHandle", "SubHealthFault", "RestartRequest", "PreSeparate", "Separate", ""})
SWITCH_NODE_STATUSES: Final = frozenset({"Healthy", "SubHealthy", "PreSeparate", "UnHealthy"})

# `<type>-<phy>`: the names ManuallySeparateNPU and UpgradeFaultReason carry (contract section 7).
# ASCII digits and the whole text: `\d` takes other scripts' digits, `$` a trailing newline.
_CHIP_NAME = re.compile(r"(?:Ascend910|Ascend310P|Ascend310|npu)-[0-9]{1,4}")
_A5_ALIAS = re.compile(r"^Ascend910-")


@dataclass(frozen=True)
class FaultEntry:
    """One object of the `-Fault` array: one chip (or vNPU) and one kind of fault.

    `codes` in the order they are to be listed (the reference: the chip's current codes, then
    those of its upgrade reasons, duplicates dropped); `time_and_level` maps a code to (first
    seen or upgraded, unix ms; its level). Codes are written upper-cased as given: the caller
    spells them as the policy does (`format_code_hex`), leading zeros kept.
    """

    fault_type: FaultType
    npu_name: str
    level: str
    codes: tuple[str, ...] = ()
    time_and_level: Mapping[str, tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class ChipReport:
    """What the device-info ConfigMap says about one chip, named `<type>-<phy>`."""

    name: str
    healthy: bool
    in_use: bool = False
    network_unhealthy: bool = False
    recovering: bool = False
    faults: tuple[FaultEntry, ...] = ()


@dataclass(frozen=True)
class UpgradeReason:
    """Why a chip's level was raised by FaultDuration, FaultFrequency or FaultAutofill."""

    upgrade_time_ms: int
    fault_code: str  # written as given: the reference also writes "AutofillFaultCode" here
    fault_level: str
    upgrade_type: str


@dataclass(frozen=True)
class SwitchEvent:
    """One switch fault as the reference writes it into SwitchInfoCfg.FaultCode."""

    event_type: int
    assembled_fault_code: str  # `[0x<alarm id>,<fault id|na>,<cpu|npu|L2|na>,na]`
    peer_port_device: int
    peer_port_id: int
    switch_chip_id: int
    switch_port_id: int
    severity: int
    assertion: int
    alarm_raised_time: int


@dataclass(frozen=True)
class SwitchReport:
    """SwitchInfoCfg of an A3 / 950 node; `time_and_level` keys are `<code>_<chip>_<port>`."""

    events: tuple[SwitchEvent, ...] = ()
    fault_level: str = "NotHandle"
    node_status: str = "Healthy"
    time_and_level: Mapping[str, tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class UnwatchedSwitch:
    """SwitchInfoCfg of a 950 node. The reference watches switch faults on A3 alone
    (GetSwitchFaultInfo) but writes the key on every 950 node too: the zero SwitchFaultInfo, every
    field empty or null and UpdateTime 0."""


UNWATCHED_SWITCH: Final = UnwatchedSwitch()


# --- the whole ConfigMap -----------------------------------------------------------------------


def render_device_info(
    rtype: str,
    chips: Sequence[ChipReport],
    *,
    update_time_s: int,
    manually_separated: Sequence[str] = (),
    upgrade_reasons: Mapping[str, Sequence[UpgradeReason]] | None = None,
    super_pod_id: int = -1,
    server_index: int = -1,
    rack_id: int | None = None,
    network_keys: bool | None = None,
    switch: SwitchReport | UnwatchedSwitch | None = None,
    description: str = DESCRIPTION,
) -> dict[str, str]:
    """The ConfigMap `data` of `mindx-dl-deviceinfo-<node>`.

    `chips` in the order the node enumerates them (logic id): that is the order of the `-Fault`
    array. `manually_separated` is written in the given order (the reference: ascending logic
    id), duplicates dropped. `network_keys` (default: for the 910 family) adds
    `-NetworkUnhealthy`. `SwitchInfoCfg` is present only when `switch` is given (A3 / 950);
    `rack_id` only on a 950 node of a 1D / 2D pod (published_rack_id).
    Raises ValueError (or TypeError) for input the reference could not have written.
    """
    data = {
        DEVICE_INFO_KEY: device_info_cfg_json(
            device_list(rtype, chips, network_keys=network_keys),
            update_time_s=update_time_s,
            super_pod_id=super_pod_id,
            server_index=server_index,
            rack_id=rack_id,
        ),
        MANUALLY_SEPARATE_KEY: ",".join(_checked_chip_names(manually_separated)),
        UPGRADE_REASON_KEY: upgrade_reasons_json(upgrade_reasons or {}),
        DESCRIPTION_KEY: description,
    }
    if switch is not None:
        data[SWITCH_INFO_KEY] = switch_info_json(switch, update_time_s=update_time_s)
    return data


def device_list(rtype: str, chips: Sequence[ChipReport], *, network_keys: bool | None = None) -> dict[str, str]:
    """DeviceList of DeviceInfoCfg (unsorted; the encoder sorts the keys as Go does).

    Every key the reference writes for the family is present, an empty list as "". The 910
    family also gets `-NetworkUnhealthy` and `-Recovering`; for 310 / 310P `-Recovering` appears
    only while a chip is being reset (our hot reset covers 300I Duo, the reference's does not;
    when nothing is resetting the reference's key set comes out unchanged).
    """
    rtype = str(rtype)
    if rtype not in RESOURCE_TYPES:
        raise ValueError(f"unknown resource type {rtype!r}; expected one of {sorted(RESOURCE_TYPES)}")
    names = [chip.name for chip in chips]
    if duplicates := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"chips listed twice: {', '.join(duplicates)}")
    base = RESOURCE_PREFIX + rtype
    family_910 = rtype in _FAMILY_910
    with_network = family_910 if network_keys is None else network_keys
    result = {
        base: _join(chip.name for chip in chips if chip.healthy and not chip.in_use),
        base + "-Unhealthy": _join(chip.name for chip in chips if not chip.healthy),
    }
    if with_network:
        result[base + "-NetworkUnhealthy"] = _join(chip.name for chip in chips if chip.network_unhealthy)
    if family_910 or any(chip.recovering for chip in chips):
        result[base + "-Recovering"] = _join(chip.name for chip in chips if chip.recovering)
    # The reference's 310 manager writes its faults under the 310P key (constants.go).
    fault_key = RESOURCE_PREFIX + ("Ascend310P" if rtype == "Ascend310" else rtype) + "-Fault"
    result[fault_key] = fault_list_json(_faults_in_reference_order(chips))
    return result


def _faults_in_reference_order(chips: Sequence[ChipReport]) -> list[FaultEntry]:
    faults: list[FaultEntry] = []
    for chip in chips:
        kinds = [entry.fault_type for entry in chip.faults]
        if len(kinds) != len(set(kinds)):
            raise ValueError(f"{chip.name}: at most one fault entry per fault type")
        # Network before card, as getDeviceFaults appends them; sorted() is stable.
        faults.extend(sorted(chip.faults, key=lambda entry: _FAULT_TYPES.index(_fault_type(entry))))
    return faults


def _join(names: Iterable[str]) -> str:
    # sets.String.List() sorts byte-wise: Ascend910-10 before Ascend910-2. For valid text,
    # code-point order is UTF-8 byte order.
    return ",".join(sorted(set(names)))


# --- DeviceInfoCfg -----------------------------------------------------------------------------


def device_info_cfg_json(
    device_list: Mapping[str, str],
    *,
    update_time_s: int,
    super_pod_id: int = -1,
    server_index: int = -1,
    rack_id: int | None = None,
) -> str:
    """DeviceInfoCfg: DeviceInfo, SuperPodID, ServerIndex, CheckCode, then RackID when given.

    RackID is a pointer with omitempty in the reference: absent when nil, written even when 0.
    """
    device_info = _device_info(device_list, update_time_s)
    cfg: dict[str, GoJSON] = {
        "DeviceInfo": device_info,
        "SuperPodID": go_int_field(super_pod_id, "SuperPodID", INT32),
        "ServerIndex": go_int_field(server_index, "ServerIndex", INT32),
        "CheckCode": _sha256(go_json(device_info)),
    }
    if rack_id is not None:
        cfg["RackID"] = go_int_field(rack_id, "RackID", INT32)
    return go_json(cfg)


def published_rack_id(rtype: str, super_pod_type: int, rack_id: int) -> int | None:
    """RackID of DeviceInfoCfg (getNodeDeviceInfoCache): the rack of a 950 node (resource type
    `npu`) in a 1D or 2D pod, as the chips report it (-1 when unread); None, no RackID, anywhere else."""
    return rack_id if rtype == ResourceType.NPU and is_pod_scene(super_pod_type) else None


def check_code(device_info: Mapping[str, object]) -> str:
    """CheckCode of a DeviceInfo object: lowercase hex sha256 of its Go JSON.

    Accepts what a reader gets from json.loads of DeviceInfoCfg["DeviceInfo"]: the fields are
    re-ordered as the Go struct orders them and unknown fields are ignored, as json.Unmarshal
    into NodeDeviceInfo would; a missing DeviceList is Go's nil map (`null`), a missing
    UpdateTime is 0.
    """
    raw_list = device_info.get("DeviceList")
    if raw_list is not None and not isinstance(raw_list, Mapping):
        raise TypeError("DeviceList must be an object of strings")
    update_time = device_info.get("UpdateTime", 0)
    if not isinstance(update_time, int):
        raise TypeError("UpdateTime must be an integer")
    return _sha256(go_json(_device_info(raw_list, update_time)))


def _device_info(raw_list: Mapping[str, object] | None, update_time_s: int) -> dict[str, GoJSON]:
    entries: dict[str, GoJSON] | None = None
    if raw_list is not None:
        entries = {}
        for key, value in raw_list.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"DeviceList entries must be strings, got {key!r}: {value!r}")
            entries[key] = value
    return {
        "DeviceList": None if entries is None else go_map(entries),
        "UpdateTime": go_int_field(update_time_s, "UpdateTime", INT64),
    }


# --- the -Fault array --------------------------------------------------------------------------


def fault_list_json(faults: Sequence[FaultEntry]) -> str:
    """The `-Fault` value: a JSON array of DeviceFault objects, `[]` when there are none."""
    return go_json([_fault(entry) for entry in faults])


def _fault(entry: FaultEntry) -> dict[str, GoJSON]:
    fault_type = _fault_type(entry)
    level = _level(entry.level, entry.npu_name)
    codes: list[str] = []
    seen: set[str] = set()
    for code in entry.codes:
        hex_code = _hex_code(code)
        if (number := normalize_code(hex_code)) not in seen:  # removeDuplicateErr: the first of a number
            seen.add(number)
            codes.append(hex_code)
    time_and_level: dict[str, GoJSON] = {}
    for code, (fault_time_ms, code_level) in entry.time_and_level.items():
        time_and_level[_hex_code(code)] = _time_and_level(fault_time_ms, _level(code_level, entry.npu_name))
    return {
        "fault_type": fault_type,
        "npu_name": entry.npu_name,
        # The reference fills all three with the chip's level.
        "large_model_fault_level": level,
        "fault_level": level,
        "fault_handling": level,
        "fault_code": ",".join(codes),
        "fault_time_and_level_map": go_map(time_and_level),
    }


def _fault_type(entry: FaultEntry) -> str:
    if entry.fault_type not in _FAULT_TYPES:
        raise ValueError(f"{entry.npu_name}: unknown fault type {entry.fault_type!r}")
    return entry.fault_type


def _level(level: str, where: str) -> str:
    try:
        return FaultLevel(level).value
    except ValueError:
        raise ValueError(f"{where}: unknown fault level {level!r}") from None


def _hex_code(code: str) -> str:
    # The reference writes strings.ToUpper(FormatFaultCodeHex(code)): the policy's own spelling, so
    # the packaged table's "020001002" keeps its leading zero; the caller spells, this checks.
    if not is_plain_hex(code):
        raise ValueError(f"fault code {code!r} is not 1 to {MAX_CODE_DIGITS} hex digits")
    return code.upper()


def _time_and_level(fault_time_ms: int, level: str) -> dict[str, GoJSON]:
    return {"fault_time": go_int_field(fault_time_ms, "fault_time", INT64), "fault_level": level}


# --- UpgradeFaultReason ------------------------------------------------------------------------


def upgrade_reasons_json(reasons: Mapping[str, Sequence[UpgradeReason]]) -> str:
    """UpgradeFaultReason: {"<chip>": [{upgrade_time, fault_code, fault_level, upgrade_type}]}.

    The reference lists a chip's reasons in Go map order (random); we sort them by time, then
    code, level and type, so that an unchanged state renders the same bytes. A chip without
    reasons is left out, as the reference deletes empty reason sets.
    """
    rendered: dict[str, GoJSON] = {}
    for name, chip_reasons in reasons.items():
        _checked_chip_names([name])
        if not chip_reasons:
            continue
        ordered = sorted(chip_reasons, key=lambda r: (r.upgrade_time_ms, r.fault_code, r.fault_level, r.upgrade_type))
        rendered[name] = [_upgrade_reason(name, reason) for reason in ordered]
    return go_json(go_map(rendered))


def _upgrade_reason(name: str, reason: UpgradeReason) -> dict[str, GoJSON]:
    if reason.upgrade_type not in UPGRADE_TYPES:
        raise ValueError(f"{name}: unknown upgrade type {reason.upgrade_type!r}")
    if not reason.fault_level:
        # Any other text is kept: a reason read from the reference's ConfigMap is written back as it was.
        raise ValueError(f"{name}: empty fault level")
    return {
        "upgrade_time": go_int_field(reason.upgrade_time_ms, "upgrade_time", INT64),
        "fault_code": reason.fault_code,
        "fault_level": reason.fault_level,
        "upgrade_type": reason.upgrade_type,
    }


def parse_upgrade_reasons(value: str) -> dict[str, list[UpgradeReason]]:
    """UpgradeFaultReason as written (reference upgradefault.go `StringToReasonCm`): chip -> reasons.

    A reason listed twice (same code, level and type) keeps the later upgrade_time, as
    `ReasonListToSet` does. Raises ValueError for malformed JSON or a name that is not
    `<type>-<phyID>` ("get phyid from <name> failed", as there)."""
    try:
        doc = loads_bounded(value, what="UpgradeFaultReason")
    except InputError as exc:
        raise ValueError(f"UpgradeFaultReason is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("UpgradeFaultReason must be an object of chip name -> reasons")
    result: dict[str, list[UpgradeReason]] = {}
    for name, items in doc.items():
        if not _CHIP_NAME.fullmatch(name):
            raise ValueError(f"get phyid from {name} failed")
        if not isinstance(items, list):
            raise ValueError(f"{name}: reasons must be an array")
        latest: dict[tuple[str, str, str], UpgradeReason] = {}
        for index, item in enumerate(items):
            reason = _parsed_reason(item, f"{name}[{index}]")
            key = (reason.fault_code, reason.fault_level, reason.upgrade_type)
            if key not in latest or reason.upgrade_time_ms > latest[key].upgrade_time_ms:
                latest[key] = reason
        result[name] = list(latest.values())
    return result


def _parsed_reason(item: object, where: str) -> UpgradeReason:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: a reason must be an object")
    time_ms = item.get("upgrade_time", 0)
    if isinstance(time_ms, bool) or not isinstance(time_ms, int):
        raise ValueError(f"{where}: upgrade_time must be an integer")
    texts = [item.get(key, "") for key in ("fault_code", "fault_level", "upgrade_type")]
    if not all(isinstance(text, str) for text in texts):
        raise ValueError(f"{where}: fault_code, fault_level and upgrade_type must be strings")
    return UpgradeReason(time_ms, *texts)


# --- ManuallySeparateNPU -----------------------------------------------------------------------


def parse_manually_separated(value: str, rtype: str = "") -> list[str]:
    """Chip names from an administrator's ManuallySeparateNPU (`Ascend910-0,Ascend910-3`).

    Tolerates spaces around names, empty items and duplicates (the first one counts); raises
    ValueError naming every malformed item, so that a typo is reported instead of silently
    un-isolating a chip. On a 950 node (`rtype` npu) `Ascend910-<phy>` names chip `npu-<phy>`:
    the reference's CheckDeviceName takes both spellings there, and writes the chip back as `npu-`.
    """
    names = _checked_chip_names(item.strip() for item in value.split(",") if item.strip())
    if rtype != ResourceType.NPU:
        return names
    return list(dict.fromkeys(_A5_ALIAS.sub(f"{ResourceType.NPU}-", name) for name in names))


def _checked_chip_names(names: Iterable[str]) -> list[str]:
    result: list[str] = []
    bad: list[str] = []
    for name in names:
        if not isinstance(name, str) or not _CHIP_NAME.fullmatch(name):
            bad.append(repr(name))
        elif name not in result:
            result.append(name)
    if bad:
        raise ValueError(f"malformed chip names (expected <type>-<phyID>, e.g. Ascend910-3): {', '.join(bad)}")
    return result


# --- SwitchInfoCfg -----------------------------------------------------------------------------


def switch_info_json(report: SwitchReport | UnwatchedSwitch, *, update_time_s: int) -> str:
    """SwitchInfoCfg: FaultCode (each event as a JSON string), FaultLevel, UpdateTime, NodeStatus,
    FaultTimeAndLevelMap; the reference builds FaultCode with make([]string, 0), so no faults is `[]`.
    An UnwatchedSwitch is the zero struct: nil slice and map (`null`), no update time.
    """
    if isinstance(report, UnwatchedSwitch):
        return go_json(
            {"FaultCode": None, "FaultLevel": "", "UpdateTime": 0, "NodeStatus": "", "FaultTimeAndLevelMap": None}
        )
    if report.fault_level not in SWITCH_FAULT_LEVELS:
        raise ValueError(f"unknown switch fault level {report.fault_level!r}")
    if report.node_status not in SWITCH_NODE_STATUSES:
        raise ValueError(f"unknown switch node status {report.node_status!r}")
    time_and_level: dict[str, GoJSON] = {}
    for key, (fault_time_ms, level) in report.time_and_level.items():
        if not isinstance(level, str):
            raise TypeError(f"switch fault {key!r}: level must be a string")
        time_and_level[key] = _time_and_level(fault_time_ms, level)
    return go_json(
        {
            "FaultCode": [_switch_event(event) for event in report.events],
            "FaultLevel": report.fault_level,
            "UpdateTime": go_int_field(update_time_s, "UpdateTime", INT64),
            "NodeStatus": report.node_status,
            "FaultTimeAndLevelMap": go_map(time_and_level),
        }
    )


def _switch_event(event: SwitchEvent) -> str:
    return go_json(
        {
            "EventType": go_int_field(event.event_type, "EventType", UINT64),
            "AssembledFaultCode": event.assembled_fault_code,
            "PeerPortDevice": go_int_field(event.peer_port_device, "PeerPortDevice", UINT64),
            "PeerPortId": go_int_field(event.peer_port_id, "PeerPortId", UINT64),
            "SwitchChipId": go_int_field(event.switch_chip_id, "SwitchChipId", UINT64),
            "SwitchPortId": go_int_field(event.switch_port_id, "SwitchPortId", UINT64),
            "Severity": go_int_field(event.severity, "Severity", UINT64),
            "Assertion": go_int_field(event.assertion, "Assertion", UINT64),
            "AlarmRaisedTime": go_int_field(event.alarm_raised_time, "AlarmRaisedTime", INT64),
        }
    )


# --- helpers -----------------------------------------------------------------------------------


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
