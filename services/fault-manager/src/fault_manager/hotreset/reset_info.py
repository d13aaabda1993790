"""The node annotation `ResetInfo`: chips waiting for a third-party or a manual reset, rendered.

Pure (no I/O): the reference Ascend Device Plugin keeps this list in memory, re-reads it from the
node at boot and writes the whole list back to the node after every change; operators and
outside tooling read the annotation to know which chips a person (or a third-party tool) must
reset. The bytes are the reference's, so such tooling keeps working.

Reference (MindCluster, component/ascend-device-plugin):
- pkg/device/reset_info_mgr.go: ResetInfo {ThirdPartyResetDevs, ManualResetDevs []ResetDevice},
  ResetDevice {CardId, DeviceId, AssociatedCardId, PhyID, LogicID int32; shouldCheckNet bool
  (unexported, so never in the JSON)}. No json tags, no omitempty: Go field names, declaration
  order. WriteResetInfo merges per list by write mode (WMOverwrite / WMAppend / WMDelete, every
  merge keyed by PhyID, first occurrence wins), then json.Marshal of the whole state is written
  with AddAnnotation(ResetInfoAnnotationKey); readAnnotation at boot (InitResetInfoMgr).
- pkg/common/constants.go: ResetInfoAnnotationKey = "ResetInfo", MaxResetTimes = 3.
- pkg/server/hot_reset_manager.go: markNeedExternalOps (WMAppend to ManualResetDevs),
  clearNeedExternalOps / filterOpsDevices (match by LogicID, WMDelete from both lists).
- pkg/server/manager.go: checkNodeResetInfo / checkDeviceStatus / checkOverRetryDev, run on
  every device update: healthy chips leave both lists (by PhyID), their busy mark and reset count
  are cleared, and third-party entries reset more than MaxResetTimes move to ManualResetDevs.
- pkg/device/ascend910.go: updateResetInfo / execRescan / fillResetDevs (AssociatedCardId -1
  when unknown).

At boot the reference only restores the two lists: busy marks and reset counts start empty, and
no chip is marked unhealthy because of the annotation; the lists are carried forward until the
chips they name are reported healthy (checkNodeResetInfo).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from ascend_common.gojson import INT32, GoJSON, GoNumber, GoObject, go_field, go_int, go_json, go_kind, go_loads

__all__ = [
    "EMPTY",
    "MAX_RESET_TIMES",
    "NO_ID",
    "RESET_INFO_ANNOTATION",
    "ResetDevice",
    "ResetInfo",
    "ResetInfoManager",
    "WriteMode",
    "check_device_status",
    "check_node_reset_info",
    "check_over_retry_dev",
    "clear_need_external_ops",
    "deduplicate",
    "exclude_array",
    "external_ops_to_clear",
    "filter_ops_devices",
    "mark_need_external_ops",
    "merge_and_deduplicate",
    "merge_fail_devs",
    "parse_reset_info",
    "read_annotation",
    "render_reset_info",
    "write_reset_info",
]

RESET_INFO_ANNOTATION: Final = "ResetInfo"
# A third-party entry reset more often than this goes to the manual list (common.MaxResetTimes).
MAX_RESET_TIMES: Final = 3
# What the reference writes for an id it could not learn (errorId, NpuDevice defaults).
NO_ID: Final = -1

_THIRD_PARTY: Final = "ThirdPartyResetDevs"
_MANUAL: Final = "ManualResetDevs"
# Go field name -> our attribute, in the struct's declaration order (the marshalled order).
_DEVICE_FIELDS: Final = (
    ("CardId", "card_id"),
    ("DeviceId", "device_id"),
    ("AssociatedCardId", "associated_card_id"),
    ("PhyID", "phy_id"),
    ("LogicID", "logic_id"),
)


class WriteMode(IntEnum):
    """How WriteResetInfo folds new entries into each list (reset_info_mgr.go WriteMode)."""

    OVERWRITE = 0
    APPEND = 1
    DELETE = 2


def _check_int32(value: object, where: str) -> int:
    # bool is an int in Python but a JSON true/false in Go, which an int32 field refuses.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{where}: expected an int32, got {type(value).__name__} {value!r}")
    if not INT32[0] <= value <= INT32[1]:
        raise ValueError(f"{where}: {value} is out of int32 range")
    return value


@dataclass(frozen=True, slots=True)
class ResetDevice:
    """One chip of either list. Every id is a Go int32; unknown ones are NO_ID (-1) or 0.

    The reference's unexported shouldCheckNet is left out: it never reaches the annotation and
    only steers the out-of-band reset that is running while it exists.
    """

    card_id: int = 0
    device_id: int = 0
    associated_card_id: int = 0
    phy_id: int = 0
    logic_id: int = 0

    def __post_init__(self) -> None:
        for go_name, attr in _DEVICE_FIELDS:
            _check_int32(getattr(self, attr), go_name)

    def to_go(self) -> dict[str, GoJSON]:
        return {go_name: getattr(self, attr) for go_name, attr in _DEVICE_FIELDS}


@dataclass(frozen=True, slots=True)
class ResetInfo:
    """The whole annotation. Lists keep the reference's order; a Go nil list reads as empty."""

    third_party_reset_devs: tuple[ResetDevice, ...] = ()
    manual_reset_devs: tuple[ResetDevice, ...] = ()

    def __post_init__(self) -> None:
        for name in ("third_party_reset_devs", "manual_reset_devs"):
            devs = tuple(getattr(self, name))
            for dev in devs:
                if not isinstance(dev, ResetDevice):
                    raise ValueError(f"{name}: expected ResetDevice entries, got {type(dev).__name__}")
            object.__setattr__(self, name, devs)


EMPTY: Final = ResetInfo()


# --- list merges (mergeFailDevs and its helpers) -------------------------------------------------


def deduplicate(devs: Iterable[ResetDevice]) -> tuple[ResetDevice, ...]:
    """The first entry of each PhyID, in order (deduplicate)."""
    return merge_and_deduplicate(devs, ())


def merge_and_deduplicate(cur: Iterable[ResetDevice], new: Iterable[ResetDevice]) -> tuple[ResetDevice, ...]:
    """`cur` then `new`, keeping the first entry of each PhyID (mergeAndDeduplicate)."""
    seen: set[int] = set()
    result: list[ResetDevice] = []
    for source in (cur, new):
        for dev in source:
            if dev.phy_id not in seen:
                seen.add(dev.phy_id)
                result.append(dev)
    return tuple(result)


def exclude_array(cur: Iterable[ResetDevice], delete: Iterable[ResetDevice]) -> tuple[ResetDevice, ...]:
    """`cur` without every entry whose PhyID is in `delete`; the other ids are not compared (excludeArray)."""
    gone = {dev.phy_id for dev in delete}
    return tuple(dev for dev in cur if dev.phy_id not in gone)


def merge_fail_devs(cur: Iterable[ResetDevice], new: Iterable[ResetDevice], mode: WriteMode) -> tuple[ResetDevice, ...]:
    """One list after a write (mergeFailDevs). An unknown mode keeps `cur`, as the reference does."""
    if mode == WriteMode.OVERWRITE:
        return deduplicate(new)
    if mode == WriteMode.APPEND:
        return merge_and_deduplicate(cur, new)
    if mode == WriteMode.DELETE:
        return exclude_array(cur, new)
    return tuple(cur)


def write_reset_info(current: ResetInfo, new: ResetInfo, mode: WriteMode) -> ResetInfo:
    """The state after WriteResetInfo(new, mode): each list merged with its counterpart in `new`.

    Both lists are merged even when `new` names only one, so APPEND / OVERWRITE also dedupe (or,
    for OVERWRITE, empty) the other list, exactly as the reference does.
    """
    return ResetInfo(
        third_party_reset_devs=merge_fail_devs(current.third_party_reset_devs, new.third_party_reset_devs, mode),
        manual_reset_devs=merge_fail_devs(current.manual_reset_devs, new.manual_reset_devs, mode),
    )


# --- the annotation text ------------------------------------------------------------------------


def render_reset_info(info: ResetInfo) -> str:
    """The annotation value, byte for byte as the reference's json.Marshal writes it.

    The reference only marshals state that went through a merge, and every merge returns a
    non-nil slice, so an empty list is always `[]` here, never Go's nil `null`.
    """
    return go_json(
        {
            _THIRD_PARTY: [dev.to_go() for dev in info.third_party_reset_devs],
            _MANUAL: [dev.to_go() for dev in info.manual_reset_devs],
        }
    )


def _fields(obj: GoObject, known: Iterable[str], where: str) -> dict[str, object]:
    """The known fields of `obj` by Go name; other keys are ignored, as Go ignores them.

    A known field given twice (in any spelling) is refused: Go would decode the second value
    into what the first left behind, a version-dependent artefact no writer of ours produces.
    """
    found: dict[str, object] = {}
    for key, value in obj:
        go_name = go_field(key, known)
        if go_name is None:
            continue
        if go_name in found:
            raise ValueError(f"{where}{go_name}: given more than once")
        found[go_name] = value
    return found


def _device(value: object, where: str) -> ResetDevice:
    if value is None:
        return ResetDevice()  # Go leaves the element at its zero value
    if not isinstance(value, GoObject):
        raise ValueError(f"{where}: expected an object, got {go_kind(value)}")
    fields = _fields(value, _DEVICE_KEYS, f"{where}.")
    ids: dict[str, int] = {}
    for go_name, attr in _DEVICE_FIELDS:
        raw = fields.get(go_name)
        if raw is None:
            continue  # absent, or null: Go keeps the zero value
        if not isinstance(raw, GoNumber):
            raise ValueError(f"{where}.{go_name}: expected an int32, got {go_kind(raw)}")
        number = go_int(raw, 32)
        if number is None:
            integer = raw.text.lstrip("-").isdigit()
            raise ValueError(f"{where}.{go_name}: {raw.text} is out of int32 range" if integer
                             else f"{where}.{go_name}: number {raw.text} is not an int32")  # fmt: skip
        ids[attr] = number
    return ResetDevice(**ids)


def _device_list(value: object, where: str) -> tuple[ResetDevice, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or isinstance(value, GoObject):
        raise ValueError(f"{where}: expected an array, got {go_kind(value)}")
    return tuple(_device(item, f"{where}[{index}]") for index, item in enumerate(value))


_INFO_KEYS: Final = (_THIRD_PARTY, _MANUAL)
_DEVICE_KEYS: Final = tuple(go_name for go_name, _ in _DEVICE_FIELDS)


def parse_reset_info(text: str) -> ResetInfo:
    """The annotation value as the reference's json.Unmarshal reads it; ValueError if it would fail.

    Accepted as Go accepts them: `null` (nothing), null lists and null entries (empty / all-zero
    entry), field names in any letter case, unknown fields (ignored). Refused: invalid JSON
    (including NaN and a trailing comma), a non-object document, a list that is not an array, an
    entry that is not an object, an id that is not an integer literal in int32 range; also, unlike
    Go, a known field given twice. The message names the field, e.g. `ManualResetDevs[2].PhyID`.
    """
    document = go_loads(text)
    if document is None:
        return EMPTY
    if not isinstance(document, GoObject):
        raise ValueError(f"expected a JSON object, got {go_kind(document)}")
    fields = _fields(document, _INFO_KEYS, "")
    return ResetInfo(
        third_party_reset_devs=_device_list(fields.get(_THIRD_PARTY), _THIRD_PARTY),
        manual_reset_devs=_device_list(fields.get(_MANUAL), _MANUAL),
    )


def read_annotation(
    annotations: Mapping[str, str] | None, key: str = RESET_INFO_ANNOTATION
) -> tuple[ResetInfo, ValueError | None]:
    """The state to start with (InitResetInfoMgr / readAnnotation), and why the annotation was dropped.

    No annotations or no key: empty, None. A value parse_reset_info refuses: empty and the error
    (the caller logs it with the node's name); all or nothing, as in the reference, which drops a
    partly decoded value whole. The next write then replaces the bad value on the node.
    """
    if annotations is None or key not in annotations:
        return EMPTY, None
    try:
        return parse_reset_info(annotations[key]), None
    except ValueError as exc:
        return EMPTY, exc


# --- what the reference's callers do with the lists ---------------------------------------------


def mark_need_external_ops(info: ResetInfo, dev: ResetDevice) -> ResetInfo:
    """`dev` appended to the manual list unless its PhyID is there (markNeedExternalOps, WMAppend).

    The reference fills LogicID, CardId, DeviceId and PhyID only; AssociatedCardId stays 0.
    """
    return write_reset_info(info, ResetInfo(manual_reset_devs=(dev,)), WriteMode.APPEND)


def filter_ops_devices(info: ResetInfo, logic_ids: Iterable[int]) -> list[int]:
    """The ids of `logic_ids` that either list names by LogicID, in `logic_ids` order (filterOpsDevices)."""
    listed = {dev.logic_id for dev in (*info.third_party_reset_devs, *info.manual_reset_devs)}
    return [logic_id for logic_id in logic_ids if logic_id in listed]


def external_ops_to_clear(info: ResetInfo, devs: Sequence[ResetDevice]) -> tuple[ResetDevice, ...]:
    """The recovered `devs` that clearNeedExternalOps deletes: those either list names by LogicID."""
    wanted = set(filter_ops_devices(info, (dev.logic_id for dev in devs)))
    return tuple(dev for dev in devs if dev.logic_id in wanted)


def clear_need_external_ops(info: ResetInfo, devs: Sequence[ResetDevice]) -> ResetInfo | None:
    """The state after recovered `devs` leave both lists, or None when the reference writes nothing.

    Matched by LogicID, then deleted from both lists by PhyID (WMDelete), as clearNeedExternalOps does.
    """
    gone = external_ops_to_clear(info, devs)
    if not gone:
        return None
    return write_reset_info(info, ResetInfo(third_party_reset_devs=gone, manual_reset_devs=gone), WriteMode.DELETE)


def check_device_status(
    fail_devs: Iterable[ResetDevice], healthy_phy_ids: Collection[int]
) -> tuple[tuple[ResetDevice, ...], bool]:
    """`fail_devs` without the healthy chips (by PhyID), and whether any left (checkDeviceStatus)."""
    devs = tuple(fail_devs)
    kept = tuple(dev for dev in devs if dev.phy_id not in healthy_phy_ids)
    changed = len(kept) != len(devs)
    return kept, changed


def check_over_retry_dev(
    info: ResetInfo, reset_count: Callable[[int], int], max_reset_times: int = MAX_RESET_TIMES
) -> ResetInfo:
    """Third-party entries reset more than `max_reset_times` times (by LogicID) moved to the end of
    the manual list, without dedupe (checkOverRetryDev)."""
    third_party: list[ResetDevice] = []
    manual = list(info.manual_reset_devs)
    for dev in info.third_party_reset_devs:
        (third_party if reset_count(dev.logic_id) <= max_reset_times else manual).append(dev)
    return ResetInfo(third_party_reset_devs=tuple(third_party), manual_reset_devs=tuple(manual))


def check_node_reset_info(
    info: ResetInfo,
    healthy_phy_ids: Collection[int],
    reset_count: Callable[[int], int],
    max_reset_times: int = MAX_RESET_TIMES,
) -> ResetInfo | None:
    """The state after a device update (checkNodeResetInfo), or None when the reference writes nothing.

    Healthy chips leave both lists; only if one did are over-retried third-party entries moved
    to the manual list and the result written as WMOverwrite (which dedupes each list). The
    caller clears the healthy chips' busy marks and reset counts first, as checkDeviceStatus does
    (ResetInfoManager.check_node_reset_info does both).
    """
    third_party, third_party_changed = check_device_status(info.third_party_reset_devs, healthy_phy_ids)
    manual, manual_changed = check_device_status(info.manual_reset_devs, healthy_phy_ids)
    if not third_party_changed and not manual_changed:
        return None
    moved = check_over_retry_dev(ResetInfo(third_party, manual), reset_count, max_reset_times)
    return write_reset_info(info, moved, WriteMode.OVERWRITE)


# --- the in-memory manager ----------------------------------------------------------------------


class ResetInfoManager:
    """The reference's ResetInfoMgr without the node client: the lists, busy chips, reset counts.

    I/O-free: a write returns the annotation text for the caller to put on the node. Busy marks and
    reset counts are by logic id and live only in memory, as in the reference (a restart forgets
    them). Not thread-safe: one event loop (or the caller's lock) serialises the calls.
    """

    def __init__(self, info: ResetInfo = EMPTY) -> None:
        self._info = info
        self._busy: set[int] = set()
        self._reset_counts: dict[int, int] = {}

    @classmethod
    def from_annotations(
        cls, annotations: Mapping[str, str] | None, key: str = RESET_INFO_ANNOTATION
    ) -> tuple[ResetInfoManager, ValueError | None]:
        """InitResetInfoMgr: the lists from the node's annotations (None: the node could not be read)."""
        info, error = read_annotation(annotations, key)
        return cls(info), error

    @property
    def info(self) -> ResetInfo:
        """ReadResetInfo."""
        return self._info

    def write(self, new: ResetInfo, mode: WriteMode, update_node: bool = True) -> str | None:
        """WriteResetInfo: merge into the lists; the annotation text to write, or None if `update_node` is off."""
        self._info = write_reset_info(self._info, new, mode)
        return render_reset_info(self._info) if update_node else None

    def is_dev_busy(self, logic_id: int) -> bool:
        return logic_id in self._busy

    def add_busy_dev(self, logic_id: int) -> None:
        self._busy.add(logic_id)

    def free_busy_dev(self, logic_id: int) -> bool:
        """Unmark `logic_id`; whether it was busy (the reference logs only then)."""
        if logic_id not in self._busy:
            return False
        self._busy.discard(logic_id)
        return True

    def get_reset_cnt(self, logic_id: int) -> int:
        return self._reset_counts.get(logic_id, 0)

    def add_reset_cnt(self, logic_id: int) -> None:
        self.set_reset_cnt(logic_id, self.get_reset_cnt(logic_id) + 1)

    def set_reset_cnt(self, logic_id: int, count: int) -> None:
        self._reset_counts[logic_id] = count

    def check_node_reset_info(self, healthy: Iterable[ResetDevice]) -> str | None:
        """checkNodeResetInfo over the chips now healthy (only their logic_id and phy_id are read).

        Every healthy chip is unmarked busy and its reset count zeroed (so it may be reset again),
        then check_node_reset_info; returns the annotation text when the lists changed, else None.
        """
        healthy_phy_ids: set[int] = set()
        for dev in healthy:
            healthy_phy_ids.add(dev.phy_id)
            self.free_busy_dev(dev.logic_id)
            self.set_reset_cnt(dev.logic_id, 0)
        new = check_node_reset_info(self._info, healthy_phy_ids, self.get_reset_cnt)
        if new is None:
            return None
        self._info = new
        return render_reset_info(new)
