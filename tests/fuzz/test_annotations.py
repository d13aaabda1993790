"""Fuzzing the parsers of what other parties write: pod and node annotations, ConfigMap values, pod objects.

Each parser gets arbitrary text and small edits of valid examples. It must return a well-formed
result (checked against a plain model of the documented format) or raise its documented error,
never anything else; where we write the value ourselves, what we write must parse back to the same.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from ascend_common.adapters.kube.configmaps import OfflineConfigMaps
from ascend_common.adapters.kube.patch import SlimNode
from ascend_common.adapters.lifecycle import Lifecycle
from ascend_common.chips import ResourceType
from ascend_common.faults import FaultLevel
from ascend_common.inuse import ASCEND_REAL, KLT_DEV, chips_in_use_for_allocation, chips_named
from ascend_common.naming import chip_name, parse_device_id, shared_device_id, vnpu_device_id
from ascend_common.pods import MAX_REQUEST, InvalidPod, SlimPod, slim_pod
from ascend_common.schemas.verdict import ChipVerdict, VerdictReason
from ascend_common.vnpu import TEMPLATE_BY_SUFFIX, TEMPLATES
from ascend_device_plugin.allocation.annotations import PREDICATE_TIME, TAKEN, UINT64_MAX, real_allocation_annotations
from ascend_device_plugin.kube.node import NodeFollower
from ascend_device_plugin.model.chip_pod import PodView
from ascend_device_plugin.volcano.annotations import (
    MAX_ANNOTATED_DEVICES,
    MAX_PHY_ID,
    DynamicRequest,
    parse_npu_core,
    parse_predicate_time,
    parse_real_devices,
    pick_pod,
)
from fault_manager.deviceinfo.configmap import (
    MANUALLY_SEPARATE_KEY,
    check_code,
    device_info_cfg_json,
    parse_manually_separated,
    render_device_info,
)
from fault_manager.hotreset.loop import HotReset
from fault_manager.hotreset.reset_config import INFERENCE_RANK_INDEX, MAX_RANK_INDEX, job_name, parse_rank_index
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.strategies import any_text, json_values, mutated_json, mutated_text, nasty_char, outcome

FUZZ = settings(max_examples=300, deadline=None, database=None)
TYPES = [t.value for t in ResourceType]
CHIP = re.compile(r"(Ascend910|Ascend310P|Ascend310|npu)-[0-9]{1,4}")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
INT32 = (-(2**31), 2**31 - 1)

phy_ids = st.integers(0, 9999)
chip_names = st.builds(lambda t, p: f"{t}-{p}", st.sampled_from(TYPES), phy_ids)
device_ids = (
    chip_names
    | st.builds(lambda t, p, i: f"{t}-{p}-{i}", st.sampled_from(TYPES), phy_ids, phy_ids)
    | st.builds(
        lambda t, s, v, p, g: f"{t}-{s}-{v}-{p}" + ("" if g is None else f"_{g}"),
        st.sampled_from(TYPES),
        st.sampled_from(sorted(TEMPLATE_BY_SUFFIX)),
        st.integers(0, 999999),
        phy_ids,
        st.none() | phy_ids,
    )
    | st.builds(lambda n: f"npu-core-{n}", st.integers(0, 200))
)
VALID_LISTS = [
    "",
    "Ascend910-0",
    "Ascend910-0,Ascend910-3",
    " Ascend910-3 , ,Ascend910-0,",
    "Ascend310P-7,npu-15,Ascend310-2",
    "Ascend910-5c.1cpu.16g-100-2_0,Ascend310P-1-2,npu-core-4",
]


def annotation_text(examples: list[str]) -> st.SearchStrategy[str]:
    return any_text | mutated_text(examples) | st.lists(device_ids, max_size=6).map(",".join)


def dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- ManuallySeparateNPU (the device-info ConfigMap, edited by administrators) --------------------


@FUZZ
@given(value=annotation_text(VALID_LISTS))
def test_manually_separated_is_a_list_of_chip_names_or_a_value_error(value: str) -> None:
    items = [item.strip() for item in value.split(",") if item.strip()]
    result = outcome(parse_manually_separated, value)
    if result.error is not None:
        assert "malformed chip names" in str(result.error)
        assert any(not CHIP.fullmatch(item) for item in items), f"{value!r} was refused but every item is a chip"
        return
    assert result.value == dedupe(items)
    # Only what chip_name() can write is a chip: a digit of another script or a trailing newline
    # would name no chip of ours and silently leave the real one un-isolated.
    assert all(CHIP.fullmatch(name) for name in result.value), result.value


@FUZZ
@given(names=st.lists(chip_names, max_size=10))
def test_manually_separated_round_trips_through_the_configmap(names: list[str]) -> None:
    data = render_device_info("Ascend910", [], update_time_s=0, manually_separated=names)
    assert parse_manually_separated(data[MANUALLY_SEPARATE_KEY]) == dedupe(names)


# --- device ids in AscendReal / kltDev (written by the plugin, editable by anyone) -----------------


@FUZZ
@given(value=annotation_text(VALID_LISTS) | device_ids)
def test_device_ids_parse_or_raise_value_error(value: str) -> None:
    parsed = outcome(parse_device_id, value).value
    if parsed is None:
        return
    assert value.isascii() and value == value.strip() and "\n" not in value, repr(value)
    assert parsed.chip == chip_name(parsed.rtype, parsed.phy_id)
    assert CHIP.fullmatch(parsed.chip)


@FUZZ
@given(rtype=st.sampled_from(list(ResourceType)), phy=phy_ids, index=phy_ids, vdev=st.integers(0, 999999))
def test_device_ids_we_write_parse_back(rtype: ResourceType, phy: int, index: int, vdev: int) -> None:
    assert parse_device_id(chip_name(rtype, phy)).phy_id == phy
    shared = parse_device_id(shared_device_id(rtype, phy, index))
    assert (shared.rtype, shared.phy_id, shared.share_index) == (rtype, phy, index)
    for suffix in TEMPLATE_BY_SUFFIX:
        try:
            device_id = vnpu_device_id(rtype, suffix, vdev, phy)
        except ValueError:
            assert len(f"{rtype.value}-{suffix}-{vdev}-{phy}") > 50
            continue
        vnpu = parse_device_id(device_id)
        assert (vnpu.rtype, vnpu.vnpu_suffix, vnpu.vdev_id, vnpu.phy_id) == (rtype, suffix, vdev, phy)


@FUZZ
@given(
    rtype=st.sampled_from(list(ResourceType)),
    devices=st.lists(
        st.tuples(phy_ids, st.none() | st.sampled_from(sorted(TEMPLATE_BY_SUFFIX)), st.integers(0, 999), phy_ids),
        min_size=1,
        max_size=8,
    ),
)
def test_the_allocation_annotations_we_write_name_the_chips_in_use(
    rtype: ResourceType, devices: list[tuple[int, str | None, int, int]]
) -> None:
    real, vfg, chips = [], {}, set()
    for phy, suffix, vdev, vfg_id in devices:
        name = chip_name(rtype, phy) if suffix is None else vnpu_device_id(rtype, suffix, vdev, phy)
        real.append(name)
        if suffix is not None:
            vfg[name] = vfg_id  # dynamic mode: the vNPU's name gets `_<vfgID>`
        chips.add(chip_name(rtype, phy))
    annotations = real_allocation_annotations(real, real, vfg_ids=vfg)
    assert chips_named(annotations[ASCEND_REAL]) == chips
    assert chips_named(annotations[KLT_DEV]) == chips


class Pod:
    """The two fields chips_in_use_for_allocation reads, holding whatever a pod may carry."""

    def __init__(self, phase: str, annotations: dict[str, str]) -> None:
        self.phase = phase
        self.annotations = annotations


@FUZZ
@given(
    pods=st.lists(
        st.builds(
            Pod,
            st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", ""]) | any_text,
            st.dictionaries(
                st.sampled_from([ASCEND_REAL, KLT_DEV, "huawei.com/Ascend910", "other"]),
                annotation_text(VALID_LISTS),
                max_size=3,
            ),
        ),
        max_size=6,
    )
)
def test_chips_in_use_names_only_chips(pods: list[Pod]) -> None:
    used = chips_in_use_for_allocation(pods)
    assert all(CHIP.fullmatch(name) for name in used), used
    expected: set[str] = set()
    for pod in pods:
        if pod.phase in ("Pending", "Running"):
            for key in (ASCEND_REAL, KLT_DEV):
                expected |= chips_named(pod.annotations.get(key, ""))
    assert used == expected


# --- pods from the apiserver --------------------------------------------------------------------

VALID_POD: dict[str, Any] = {
    "metadata": {
        "name": "train-0",
        "namespace": "default",
        "uid": "6f1c-11",
        "resourceVersion": "7",
        "creationTimestamp": "2024-01-01T00:00:00Z",
        "annotations": {ASCEND_REAL: "Ascend910-0,Ascend910-1", PREDICATE_TIME: "100", "hccl/rankIndex": "0"},
        "labels": {"volcano.sh/job-name": "job"},
    },
    "spec": {
        "nodeName": "node-a",
        "containers": [{"name": "c", "resources": {"limits": {"huawei.com/Ascend910": "2"}, "requests": {"cpu": "1"}}}],
    },
    "status": {"phase": "Pending"},
}
POD_VALUES = (
    json_values
    | mutated_text(["default", "train-0", "2", "2Ki", "2024-01-01T00:00:00Z", "Pending", "6f1c-11"])
    | st.sampled_from(["ns\n", "2\n", "+2", "1" * 5000, "9" * 30 + "Ei", "2024-13-01T00:00:00Z", "00000000-0000"])
)


@settings(FUZZ, max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(obj=mutated_json(VALID_POD, POD_VALUES))
def test_slim_pod_is_well_formed_or_invalid_pod(obj: Any) -> None:
    result = outcome(slim_pod, obj, errors=(InvalidPod,))
    if result.error is not None:
        assert cast(InvalidPod, result.error).reason
        return
    pod = cast(SlimPod, result.value)
    # Names that the apiserver could never have sent are refused, not cached.
    assert len(pod.namespace) <= 63 and DNS_LABEL.fullmatch(pod.namespace), repr(pod.namespace)
    assert len(pod.name) <= 253 and DNS_SUBDOMAIN.fullmatch(pod.name), repr(pod.name)
    assert 0 < len(pod.uid) <= 128
    assert all(k.startswith("huawei.com/") and 0 <= v <= MAX_REQUEST for k, v in pod.requests.items())
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in pod.annotations.items())
    assert math.isfinite(pod.created)


# --- the Volcano annotations the device-plugin reads -----------------------------------------------


def go_parse_uint(value: str) -> int | None:
    """strconv.ParseUint(value, 10, 64): ASCII digits only, leading zeros allowed, no sign or space."""
    if not re.fullmatch(r"[0-9]+", value):
        return None
    digits = value.lstrip("0") or "0"
    if len(digits) > 20 or int(digits) > UINT64_MAX:
        return None
    return int(digits)


predicate_times = (
    any_text
    | mutated_text(["0", "100", "1700000000000", TAKEN, "18446744073709551616"])
    | st.integers(0, 2**70).map(str)
    | st.integers(0, 6000).map(lambda zeros: "0" * zeros + "7")
)


@FUZZ
@given(value=predicate_times)
def test_predicate_time_parses_exactly_as_go_parse_uint(value: str) -> None:
    expected = go_parse_uint(value)
    result = outcome(parse_predicate_time, value)
    assert result.value == expected, f"{value[:60]!r}: {result.value} (Go: {expected}; error: {result.error})"


def real_devices_model(value: str, rtype: ResourceType) -> list[str] | None:
    items = [item.strip() for item in value.split(",")]
    canonical = re.compile(rf"{rtype.value}-(0|[1-9][0-9]{{0,3}})")
    if len(items) > MAX_ANNOTATED_DEVICES or len(set(items)) != len(items):
        return None
    if not all(canonical.fullmatch(item) for item in items):
        return None
    return items


@FUZZ
@given(value=annotation_text(VALID_LISTS), rtype=st.sampled_from(list(ResourceType)))
def test_real_devices_are_canonical_chips_of_the_type_or_a_value_error(value: str, rtype: ResourceType) -> None:
    expected = real_devices_model(value, rtype)
    result = outcome(parse_real_devices, value, rtype)
    assert result.value == expected, f"{value!r} -> {result.value} ({result.error})"


@FUZZ
@given(rtype=st.sampled_from(list(ResourceType)), phys=st.lists(st.integers(0, 9999), min_size=1, max_size=64))
def test_real_devices_round_trip(rtype: ResourceType, phys: list[int]) -> None:
    names = dedupe([chip_name(rtype, p) for p in phys])
    assert parse_real_devices(",".join(names), rtype) == names


def phy_model(text: str) -> int | None:
    if not re.fullmatch(r"0|[1-9][0-9]{0,3}", text) or int(text) > MAX_PHY_ID:
        return None
    return int(text)


def npu_core_model(value: str) -> DynamicRequest | None:
    value = value.strip()
    if "-" in value:
        parts = [p.strip() for p in value.split("-")]
        if len(parts) != 2 or parts[1] not in TEMPLATES:
            return None
        phy = phy_model(parts[0])
        return None if phy is None else DynamicRequest((phy,), parts[1])
    items = [item.strip() for item in value.split(",")]
    if len(items) > MAX_ANNOTATED_DEVICES or len(set(items)) != len(items):
        return None
    phys = [phy_model(item) for item in items]
    if any(p is None for p in phys):
        return None
    return DynamicRequest(tuple(cast(list[int], phys)))


NPU_CORE_EXAMPLES = ["0-vir02", "3-vir05_1c_16g", "100-vir16", "0,1", " 1 , 0 ", "7"]


@FUZZ
@given(value=any_text | mutated_text(NPU_CORE_EXAMPLES))
def test_npu_core_annotation_parses_as_documented_or_a_value_error(value: str) -> None:
    expected = npu_core_model(value)
    result = outcome(parse_npu_core, value)
    assert result.value == expected, f"{value!r} -> {result.value} ({result.error})"


@FUZZ
@given(
    request=st.builds(DynamicRequest, st.tuples(st.integers(0, MAX_PHY_ID)), st.sampled_from(sorted(TEMPLATES)))
    | st.builds(DynamicRequest, st.lists(st.integers(0, MAX_PHY_ID), min_size=1, max_size=8, unique=True).map(tuple))
)
def test_npu_core_round_trip(request: DynamicRequest) -> None:
    if request.template is not None:
        text = f"{request.phy_ids[0]}-{request.template}"
    else:
        text = ",".join(str(p) for p in request.phy_ids)
    assert parse_npu_core(text) == request


RES = "huawei.com/Ascend910"
volcano_pods = st.builds(
    lambda i, phase, request, deleting, created, devices, time: PodView(
        namespace="ns",
        name=f"p{i}",
        uid=f"u{i}",
        phase=phase,
        annotations={
            **({RES: devices} if devices is not None else {}),
            **({PREDICATE_TIME: time} if time is not None else {}),
        },
        requests={RES: request},
        deleting=deleting,
        created=created,
    ),
    st.integers(0, 10**6),
    st.sampled_from(["Pending", "Running", "Pending\n"]),
    st.integers(-2, 4),
    st.booleans(),
    st.floats(0, 10.0),
    st.none() | annotation_text(["Ascend910-0,Ascend910-1", "Ascend910-2", "Ascend910-3,Ascend910-4,Ascend910-5"]),
    st.none() | predicate_times,
)


@FUZZ
@given(pods=st.lists(volcano_pods, max_size=8, unique_by=lambda p: p.name), count=st.integers(1, 3))
def test_volcano_picks_the_oldest_well_annotated_pod(pods: list[PodView], count: int) -> None:
    choice = pick_pod(pods, RES, count)
    eligible = []
    for pod in pods:
        # The reference's rule: any active pod; no or an unreadable predicate-time ranks as the largest.
        if pod.request(RES) <= 0 or pod.phase in ("Succeeded", "Failed") or pod.deleting or RES not in pod.annotations:
            continue
        devices = real_devices_model(pod.annotations[RES], ResourceType.ASCEND910)
        parsed = go_parse_uint(pod.annotations.get(PREDICATE_TIME, ""))
        if parsed == UINT64_MAX:
            continue  # taken
        time = UINT64_MAX if parsed is None else parsed
        if devices is not None and len(devices) == count:
            eligible.append(((time, pod.created, pod.namespace, pod.name), pod, devices))
    if not eligible:
        assert choice.pod is None
        return
    _, pod, devices = min(eligible, key=lambda e: e[0])
    assert choice.pod == pod
    assert list(choice.devices) == devices
    assert all(reject.pod != pod and reject.reason for reject in choice.rejects)


# --- hccl/rankIndex and the job labels the hot reset reads ------------------------------------------


def rank_index_model(value: str | None) -> int:
    if value is None or not re.fullmatch(r"-1|[0-9]{1,12}", value):
        return INFERENCE_RANK_INDEX
    number = int(value)
    return number if number <= MAX_RANK_INDEX else INFERENCE_RANK_INDEX


@FUZZ
@given(value=st.none() | any_text | mutated_text(["0", "2", "-1", "15", str(MAX_RANK_INDEX)]) | st.integers().map(str))
def test_rank_index_is_a_usable_rank_or_inference(value: str | None) -> None:
    index = parse_rank_index(value)
    assert index == rank_index_model(value), f"{value!r} -> {index}"


@FUZZ
@given(labels=st.dictionaries(st.sampled_from(["volcano.sh/job-name", "deploy-name", "x"]) | any_text, any_text))
def test_job_name_is_a_label_value_or_none(labels: dict[str, str]) -> None:
    name = job_name(labels)
    assert name is None or (name and name in labels.values())


# --- CheckCode: what ClusterD recomputes from the DeviceInfoCfg it reads ------------------------------


@FUZZ
@given(
    device_list=st.dictionaries(st.text(max_size=30), st.text(max_size=60), max_size=6),
    update=st.integers(-(2**63), 2**63 - 1),
)
def test_check_code_of_a_written_device_info_matches(device_list: dict[str, str], update: int) -> None:
    cfg = json.loads(device_info_cfg_json(device_list, update_time_s=update))
    assert check_code(cfg["DeviceInfo"]) == cfg["CheckCode"]


@FUZZ
@given(info=mutated_json({"DeviceList": {"huawei.com/Ascend910": "Ascend910-0"}, "UpdateTime": 1}, json_values))
def test_check_code_of_a_foreign_device_info_is_a_hash_or_a_type_error(info: Any) -> None:
    if not isinstance(info, dict):
        return
    code = outcome(check_code, info, errors=(TypeError, ValueError)).value
    assert code is None or re.fullmatch(r"[0-9a-f]{64}", code)


# --- node annotations the plugin reads back (superPodID goes into every pod's rank table) -------------


@FUZZ
@given(value=st.none() | any_text | mutated_text(["-1", "0", "7", "2147483647"]) | st.integers().map(str))
def test_super_pod_id_from_the_node_fits_go_int32(value: str | None) -> None:
    follower = NodeFollower("node-a")
    follower.node = SlimNode(
        name="node-a",
        uid="u",
        labels={},
        annotations={} if value is None else {"superPodID": value, "serverIndex": "3"},
        addresses={"InternalIP": "10.0.0.1"},
        resource_version="1",
    )
    facts = follower.facts()
    # The rank-table annotation's super_pod_id is an int32 for Volcano and ClusterD.
    assert INT32[0] <= facts.super_pod_id <= INT32[1], value
    if value is not None and re.fullmatch(r"-?[0-9]{1,9}", value):
        assert facts.super_pod_id == int(value)


def test_strategies_reach_the_characters_that_broke_parsers() -> None:
    """The shared alphabet must keep the digits of other scripts and the newline that `\\d` and `$` accept."""
    for char in ("٣", "\n", "\ud800"):
        assert char in cast(Any, nasty_char).elements


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("Ascend910-٣", None),  # an Arabic-Indic digit names no chip of ours
        ("Ascend910-3\n,Ascend910-4", ["Ascend910-3", "Ascend910-4"]),  # strip() drops the newline
        ("npu-\uff13", None),
    ],
)
def test_regression_manually_separated_refuses_other_scripts_digits(value: str, names: list[str] | None) -> None:
    if names is None:
        with pytest.raises(ValueError, match="malformed chip names"):
            parse_manually_separated(value)
    else:
        assert parse_manually_separated(value) == names


@pytest.mark.parametrize(
    ("rank_index", "rank_id"),
    [
        ("2", 2),  # one chip per pod: RankId = the rank index
        ("-1", -1),
        ("-2", -1),  # rank_id() refused it: the job was never told
        ("99999999999999999999", -1),  # a RankId beyond Go's int: render_reset_config() refused it
        ("2147483648", -1),
        ("٣", -1),  # int() took it, the reference's strconv.Atoi does not
        (" 2", -1),
    ],
)
async def test_regression_a_bad_rank_index_still_tells_the_job(tmp_path: Path, rank_index: str, rank_id: int) -> None:
    configmaps = OfflineConfigMaps(tmp_path)
    empty = '{"RankList":[],"UpdateTime":0,"RetryTime":0,"FaultFlushing":false,"GracefulExit":0,'
    empty += '"RestartFaultProcess":false}'
    await configmaps.put("ns", "reset-config-job", {"reset.json": empty}, {"reset": "true"}, None)
    verdict = ChipVerdict(
        chip="Ascend910-0", logic_id=0, phy_id=0, fault_level=FaultLevel.RESTART_NPU, schedulable=False,
        reason=VerdictReason.FAULT_CODE, since=0.0, codes=["8C1FA006"],
    )  # fmt: skip
    board = SimpleNamespace(current=lambda: {"Ascend910-0": verdict})
    policy = SimpleNamespace(table=SimpleNamespace(spellings={}), customization=SimpleNamespace(spellings={}))
    state = SimpleNamespace(verdicts=board.current, policy=lambda: policy)
    hot_reset = HotReset(
        state=cast(Any, state), marks=cast(Any, None), exporter=cast(Any, None), store=cast(Any, None),
        clock=cast(Any, SimpleNamespace(now=lambda: 100.0)), node_name="node-a", tasks=Lifecycle().scope("hot-reset"),
        configmaps=configmaps,
    )  # fmt: skip
    obj = copy.deepcopy(VALID_POD)
    obj["metadata"]["annotations"] = {ASCEND_REAL: "Ascend910-0", "hccl/rankIndex": rank_index}
    chip = SimpleNamespace(name="Ascend910-0", logic_id=0)
    await hot_reset._tell_jobs({("ns", "job"): [slim_pod(obj)]}, cast(Any, [chip]), "unrecovered")
    written_cm = await configmaps.get("ns", "reset-config-job")
    assert written_cm is not None
    ranks = json.loads(written_cm.data["reset.json"])["RankList"]
    written = [(r["RankId"], r["LogicId"], r["Status"], r["Policy"]) for r in ranks]
    assert written == [(rank_id, 0, "unrecovered", "reset")]


@pytest.mark.parametrize(
    ("quantity", "count"),
    [
        ("1" * 5_000, None),  # int() raised a bare ValueError past 4300 digits
        ("0" * 5_000 + "2", 2),  # leading zeros are still a number
        ("2\n", None),  # `$` let the newline through
        ("2Mi", None),  # more than MAX_REQUEST
        ("8", 8),
    ],
)
def test_regression_npu_quantities_parse_or_refuse_the_pod(quantity: str, count: int | None) -> None:
    obj = copy.deepcopy(VALID_POD)
    obj["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] = quantity
    if count is None:
        with pytest.raises(InvalidPod, match="quantity"):
            slim_pod(obj)
    else:
        assert slim_pod(obj).requests == {"huawei.com/Ascend910": count}


@pytest.mark.parametrize("field", ["name", "namespace"])
def test_regression_a_pod_name_with_a_trailing_newline_is_refused(field: str) -> None:
    obj = copy.deepcopy(VALID_POD)
    obj["metadata"][field] += "\n"
    with pytest.raises(InvalidPod, match="DNS-1123"):
        slim_pod(obj)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("5\n", None),  # `$` let the newline through
        ("\u0665", None),  # int() reads other scripts' digits, Go does not
        ("0" * 6_000 + "7", 7),  # Go reads the leading zeros; int() raised past 4300 digits
        ("00018446744073709551615", 2**64 - 1),
        ("18446744073709551616", None),
    ],
)
def test_regression_predicate_time_is_read_as_go_reads_it(value: str, parsed: int | None) -> None:
    if parsed is None:
        with pytest.raises(ValueError, match="predicate-time"):
            parse_predicate_time(value)
    else:
        assert parse_predicate_time(value) == parsed


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("1\u0660-vir02", None), ("1\u0660", None), ("10-vir02", DynamicRequest((10,), "vir02"))],
)
def test_regression_npu_core_phy_ids_are_ascii(value: str, parsed: DynamicRequest | None) -> None:
    if parsed is None:
        with pytest.raises(ValueError, match="phy id"):
            parse_npu_core(value)
    else:
        assert parse_npu_core(value) == parsed


@pytest.mark.parametrize(
    "device_id", ["Ascend910-3\n", "Ascend910-\u0663", "Ascend910-2c-100-\u0660", "Ascend310P-1-2\n"]
)
def test_regression_device_ids_are_ascii_and_whole(device_id: str) -> None:
    with pytest.raises(ValueError, match="not an Ascend device id"):
        parse_device_id(device_id)


@pytest.mark.parametrize(("value", "super_pod_id"), [("2147483648", -1), ("-2147483649", -1), ("7", 7), ("x", -1)])
def test_regression_super_pod_id_outside_int32_is_the_default(value: str, super_pod_id: int) -> None:
    follower = NodeFollower("node-a")
    follower.node = SlimNode(
        name="node-a", uid="u", labels={}, annotations={"superPodID": value}, addresses={}, resource_version="1"
    )
    assert follower.facts().super_pod_id == super_pod_id
