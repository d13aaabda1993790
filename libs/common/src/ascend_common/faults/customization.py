"""faultCustomization.json: FaultDuration, FaultFrequency and GraceTolerance (contract section 7).

Reference: Huawei MindCluster component/ascend-device-plugin/pkg/common/fault_code.go
(`LoadFaultCustomization`, `validateFaultDurationCustomization`, `validateFaultFrequencyCustomization`,
`loadGraceToleranceCustomization`, `setAutofillReasonReleaseTime`) and pkg/common/constants.go (ranges
and defaults).

The reference logs and skips a bad rule (and replaces an out-of-range GraceTolerance value by its
default), so a typo silently switches a rule off. Like table.py, this loader refuses the whole file
instead, with a FaultPolicyError whose `key` is the JSON path of the offending value (for example
`FaultFrequency[1].TimeWindow`), so the fault-manager keeps its last good policy and says why.
What we keep from the reference:
  - the value ranges and defaults (constants.go);
  - absent or null values mean what Go's zero value means there: FaultTimeout / RecoverTimeout 0,
    ReleaseTimeWindow 0 = never release, an absent GraceTolerance value = its default;
  - a code listed by two rules of one kind: the first rule wins and the later listing is dropped
    (fault_code.go `loadFaultDurationCustomization` / `loadFaultFrequencyCustomization` skip "duplicated
    event id"); the dropped listings are recorded in `duplicate_codes` so callers can log them;
  - FaultDuration may not escalate to ManuallySeparateNPU (`FaultDurationTypeSet`), and a FaultFrequency
    rule whose level is not ManuallySeparateNPU needs a ReleaseTimeWindow, since nothing else would ever
    release it (`validateFaultFrequencyCustomization`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import TypeVar

from ascend_common.faults.levels import FaultLevel
from ascend_common.faults.table import (
    FaultCodeTable,
    FaultPolicyError,
    PolicySource,
    SwitchFaultTable,
    load_fault_code_table,
    load_switch_fault_table,
    normalize_code,
    register_spellings,
)

FAULT_CUSTOMIZATION_FILE = "faultCustomization.json"
_DATA_PACKAGE = "ascend_common.data"

# Inclusive ranges, seconds unless noted (reference pkg/common/constants.go).
FAULT_TIMEOUT_RANGE = (0, 600)  # MinFaultTimeout..MaxFaultTimeout
RECOVER_TIMEOUT_RANGE = (0, 86400)  # MinRecoverTimeout..MaxRecoverTimeout
TIME_WINDOW_RANGE = (60, 864000)  # MinFaultFrequencyTimeWindow..MaxFaultFrequencyTimeWindow
TIMES_RANGE = (1, 100)  # MinFaultFrequencyTimes..MaxFaultFrequencyTimes (a count)
# MinReleaseTimeWindow..MaxReleaseTimeWindow; 0 (or absent) means never. The reference stores "never"
# as MaxReleaseTimeWindow = 1 << 32, so that value is accepted and also means never.
RELEASE_TIME_WINDOW_RANGE = (60, 1 << 32)
WAIT_PROCESS_READ_CM_RANGE = (5, 90)
WAIT_DEVICE_RESET_RANGE = (60, 180)
WAIT_FAULT_SELF_HEALING_RANGE = (1, 30)

# FaultTypeSet / FaultDurationTypeSet of fault_code.go: every level but NormalNPU, and FaultDuration
# additionally not ManuallySeparateNPU.
FREQUENCY_LEVELS: frozenset[FaultLevel] = frozenset(FaultLevel) - {FaultLevel.NORMAL_NPU}
DURATION_LEVELS: frozenset[FaultLevel] = FREQUENCY_LEVELS - {FaultLevel.MANUALLY_SEPARATE_NPU}

_TOP_KEYS = ("GraceTolerance", "FaultFrequency", "FaultDuration")
_GRACE_KEYS = ("WaitProcessReadCMTime", "WaitDeviceResetTime", "WaitFaultSelfHealingTime")
_DURATION_KEYS = ("EventId", "FaultTimeout", "RecoverTimeout", "FaultHandling")
_FREQUENCY_KEYS = ("EventId", "TimeWindow", "Times", "FaultHandling", "ReleaseTimeWindow")
_RULE_INDEX = re.compile(r"Fault(?:Duration|Frequency)\[(\d+)\]")


@dataclass(frozen=True)
class DurationRule:
    """One FaultDuration entry: a code counts only after it has lasted `fault_timeout_s`, and stops
    counting only after it has been gone `recover_timeout_s`; while it counts the chip is at `handling`."""

    event_ids: frozenset[str]
    fault_timeout_s: int
    recover_timeout_s: int
    handling: FaultLevel


@dataclass(frozen=True)
class FrequencyRule:
    """One FaultFrequency entry: `times` occurrences inside `time_window_s` escalate the chip to
    `handling`; the escalation is released after `release_time_window_s` without an occurrence
    (0 = never: only an administrator releases it)."""

    event_ids: frozenset[str]
    time_window_s: int
    times: int
    handling: FaultLevel
    release_time_window_s: int = 0


@dataclass(frozen=True)
class GraceTolerance:
    """Bounds of the in-place recovery steps of contract section 8, seconds (reference defaults)."""

    wait_process_read_cm_s: int = 30  # DefaultProcessReadCMTime
    wait_device_reset_s: int = 150  # DefaultWaitDeviceResetTime
    wait_fault_self_healing_s: int = 15  # DefaultWaitFaultSelfHealingTime


R = TypeVar("R", DurationRule, FrequencyRule)


@dataclass(frozen=True)
class FaultCustomization:
    """faultCustomization.json, resolved.

    Lookups go by normalize_code() form and the first rule listing a code wins, as in the reference.
    `duplicate_codes` holds `(path, code)` for each listing that lost to an earlier one.
    """

    durations: tuple[DurationRule, ...] = ()
    frequencies: tuple[FrequencyRule, ...] = ()
    grace: GraceTolerance = field(default_factory=GraceTolerance)
    duplicate_codes: tuple[tuple[str, str], ...] = ()
    spellings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    _duration_index: Mapping[str, DurationRule] = field(init=False, repr=False, compare=False)
    _frequency_index: Mapping[str, FrequencyRule] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Built once here so lookups are O(1); first-wins also for rules built directly in code.
        object.__setattr__(self, "_duration_index", _first_wins(self.durations))
        object.__setattr__(self, "_frequency_index", _first_wins(self.frequencies))

    def duration_rule(self, code: str | int) -> DurationRule | None:
        """The FaultDuration rule for `code`, None when none lists it; ValueError for a malformed code."""
        return self._duration_index.get(normalize_code(code))

    def frequency_rule(self, code: str | int) -> FrequencyRule | None:
        """The FaultFrequency rule for `code`, None when none lists it; ValueError for a malformed code."""
        return self._frequency_index.get(normalize_code(code))

    def longest_release_window_s(self) -> int:
        """How long a FaultAutofill reason lives: the longest configured ReleaseTimeWindow, 0 = never.

        Reference fault_code.go `setAutofillReasonReleaseTime`: rules that never release are skipped, and
        when no rule has a ReleaseTimeWindow the autofill reason is never released.
        """
        return max((rule.release_time_window_s for rule in self.frequencies), default=0)


def _first_wins(rules: tuple[R, ...]) -> Mapping[str, R]:
    index: dict[str, R] = {}
    for rule in rules:
        for code in rule.event_ids:
            index.setdefault(code, rule)
    return MappingProxyType(index)


@dataclass(frozen=True)
class PolicyBundle:
    """The policy files of one source (the ConfigMap `mindx-dl-fault-config`); None = not given."""

    fault_code: FaultCodeTable | None = None
    customization: FaultCustomization | None = None
    switch: SwitchFaultTable | None = None


# --- loading -------------------------------------------------------------------------------------


def load_fault_customization(obj: PolicySource) -> FaultCustomization:
    """Build a FaultCustomization from faultCustomization.json (parsed, or its bytes / text).

    Raises FaultPolicyError naming the JSON path of the first bad value.
    """
    doc = _document(obj)
    _reject_unknown_keys(doc, _TOP_KEYS, "")
    claimed_durations: set[str] = set()
    claimed_frequencies: set[str] = set()
    duplicates: list[tuple[str, str]] = []
    durations = tuple(
        _duration_rule(item, path, claimed_durations, duplicates) for item, path in _rule_items(doc, "FaultDuration")
    )
    frequencies = tuple(
        _frequency_rule(item, path, claimed_frequencies, duplicates)
        for item, path in _rule_items(doc, "FaultFrequency")
    )
    # LoadFaultCustomization reads FaultFrequency before FaultDuration: that order fixes the spellings.
    spellings: dict[str, str] = {}
    for key in ("FaultFrequency", "FaultDuration"):
        for item, _path in _rule_items(doc, key):
            ids = item.get("EventId")
            register_spellings(spellings, ids if isinstance(ids, list) else ())
    return FaultCustomization(
        durations=durations,
        frequencies=frequencies,
        grace=_grace(doc.get("GraceTolerance")),
        duplicate_codes=tuple(duplicates),
        spellings=MappingProxyType(spellings),
    )


@cache
def default_fault_customization() -> FaultCustomization:
    """The packaged faultCustomization.json (the reference's default policy), read once on first use."""
    return load_fault_customization(resources.files(_DATA_PACKAGE).joinpath(FAULT_CUSTOMIZATION_FILE).read_bytes())


def validate_policy_bundle(
    fault_code: bytes | str | None,
    customization: bytes | str | None,
    switch: bytes | str | None,
) -> PolicyBundle:
    """Load every given policy file; raise the first FaultPolicyError (files in the order of the arguments).

    The fault-manager calls this on a ConfigMap before adopting any of it, so a policy is taken whole or not at all.
    """
    return PolicyBundle(
        fault_code=None if fault_code is None else load_fault_code_table(fault_code),
        customization=None if customization is None else load_fault_customization(customization),
        switch=None if switch is None else load_switch_fault_table(switch),
    )


def _fail(path: str, detail: str) -> FaultPolicyError:
    """The error for the value at JSON path `path` ("" = the document): `key` is the path, `index` the
    position of the rule it is in (None outside FaultDuration / FaultFrequency)."""
    where = f"{path}: " if path else ""
    rule = _RULE_INDEX.match(path)
    index = int(rule.group(1)) if rule else None
    return FaultPolicyError(f"{FAULT_CUSTOMIZATION_FILE}: {where}{detail}", key=path or None, index=index)


def _shown(value: object) -> str:
    """A value as the file spells it, shortened: messages quote what the administrator wrote."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    except RecursionError:  # a parsed document handed in directly can nest deeper than the encoder goes
        text = f"a deeply nested {_json_type(value)}"
    return text if len(text) <= 40 else text[:37] + "..."


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _document(obj: PolicySource) -> Mapping[str, object]:
    parsed: object = obj
    if isinstance(obj, (bytes, bytearray, str)):
        try:
            parsed = json.loads(obj)
        # ValueError: besides syntax and encoding errors, an integer literal over 4300 digits;
        # RecursionError: nesting deeper than the parser's stack.
        except (ValueError, RecursionError) as exc:
            raise _fail("", f"not valid JSON: {exc}") from exc
    if not isinstance(parsed, Mapping):
        raise _fail("", f"expected a JSON object, got {_json_type(parsed)}")
    return parsed


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _reject_unknown_keys(obj: Mapping[str, object], known: tuple[str, ...], parent: str) -> None:
    for key in obj:
        if key in known:
            continue
        # Go's encoding/json would match a key case-insensitively; we do not, but say what was meant.
        hint = next((k for k in known if isinstance(key, str) and k.lower() == key.lower()), None)
        suffix = f" (did you mean {hint!r}?)" if hint else ""
        raise _fail(_join(parent, str(key)), f"unknown key{suffix}")


def _rule_items(doc: Mapping[str, object], key: str) -> list[tuple[Mapping[str, object], str]]:
    raw = doc.get(key)
    if raw is None:  # absent or null: no rules, as Go leaves a nil slice
        return []
    if not isinstance(raw, list):
        raise _fail(key, f"must be an array, got {_json_type(raw)}")
    items: list[tuple[Mapping[str, object], str]] = []
    for index, item in enumerate(raw):
        path = f"{key}[{index}]"
        if not isinstance(item, Mapping):
            raise _fail(path, f"must be an object, got {_json_type(item)}")
        items.append((item, path))
    return items


def _int(obj: Mapping[str, object], parent: str, key: str, bounds: tuple[int, int] | None) -> int | None:
    """An integer field, None when absent or null; floats are refused as Go refuses them for int64."""
    value = obj.get(key)
    path = _join(parent, key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"must be an integer, got {_shown(value)}")
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        raise _fail(path, f"{value} is outside {bounds[0]}..{bounds[1]}")
    return value


def _required_int(obj: Mapping[str, object], parent: str, key: str, bounds: tuple[int, int]) -> int:
    value = _int(obj, parent, key, bounds)
    if value is None:
        # Go would read 0, which is below the minimum: the reference drops the rule.
        raise _fail(_join(parent, key), f"missing (an integer in {bounds[0]}..{bounds[1]})")
    return value


def _handling(obj: Mapping[str, object], parent: str, allowed: frozenset[FaultLevel]) -> FaultLevel:
    path = _join(parent, "FaultHandling")
    names = ", ".join(level.value for level in FaultLevel if level in allowed)
    value = obj.get("FaultHandling")
    if value is None:
        raise _fail(path, f"missing (one of {names})")
    if not isinstance(value, str):
        raise _fail(path, f"must be a string, got {_shown(value)}")
    try:
        level = FaultLevel(value)
    except ValueError:
        level = None
    if level is None or level not in allowed:
        raise _fail(path, f"{value!r} is not one of {names}")
    return level


def _event_ids(
    obj: Mapping[str, object],
    parent: str,
    claimed: set[str],
    duplicates: list[tuple[str, str]],
) -> frozenset[str]:
    path = _join(parent, "EventId")
    raw = obj.get("EventId")
    if raw is None:
        raise _fail(path, "missing (a non-empty array of hex codes)")
    if not isinstance(raw, list):
        raise _fail(path, f"must be an array of strings, got {_json_type(raw)}")
    if not raw:
        # The reference skips such a rule with a warning; an empty rule is a mistake worth reporting.
        raise _fail(path, "empty (list at least one hex code)")
    codes: set[str] = set()
    for index, item in enumerate(raw):
        item_path = f"{path}[{index}]"
        if not isinstance(item, str):
            raise _fail(item_path, f"must be a string, got {_shown(item)}")
        try:
            code = normalize_code(item)
        except ValueError:
            raise _fail(item_path, f"{item!r} is not a hex code") from None
        if code in claimed:
            duplicates.append((item_path, code))
            continue
        claimed.add(code)
        codes.add(code)
    return frozenset(codes)


def _duration_rule(
    obj: Mapping[str, object], path: str, claimed: set[str], duplicates: list[tuple[str, str]]
) -> DurationRule:
    _reject_unknown_keys(obj, _DURATION_KEYS, path)
    event_ids = _event_ids(obj, path, claimed, duplicates)
    fault_timeout = _int(obj, path, "FaultTimeout", FAULT_TIMEOUT_RANGE)
    recover_timeout = _int(obj, path, "RecoverTimeout", RECOVER_TIMEOUT_RANGE)
    return DurationRule(
        event_ids=event_ids,
        fault_timeout_s=fault_timeout or 0,
        recover_timeout_s=recover_timeout or 0,
        handling=_handling(obj, path, DURATION_LEVELS),
    )


def _frequency_rule(
    obj: Mapping[str, object], path: str, claimed: set[str], duplicates: list[tuple[str, str]]
) -> FrequencyRule:
    _reject_unknown_keys(obj, _FREQUENCY_KEYS, path)
    event_ids = _event_ids(obj, path, claimed, duplicates)
    time_window = _required_int(obj, path, "TimeWindow", TIME_WINDOW_RANGE)
    times = _required_int(obj, path, "Times", TIMES_RANGE)
    handling = _handling(obj, path, FREQUENCY_LEVELS)
    release = _int(obj, path, "ReleaseTimeWindow", None) or 0
    release_path = _join(path, "ReleaseTimeWindow")
    low, high = RELEASE_TIME_WINDOW_RANGE
    if release != 0 and not low <= release <= high:
        raise _fail(release_path, f"{release} is outside {low}..{high} (or 0 for never)")
    if release == high:
        release = 0
    if release == 0 and handling is not FaultLevel.MANUALLY_SEPARATE_NPU:
        raise _fail(
            release_path,
            f"required when FaultHandling is {handling.value} (only ManuallySeparateNPU may be never released)",
        )
    return FrequencyRule(
        event_ids=event_ids,
        time_window_s=time_window,
        times=times,
        handling=handling,
        release_time_window_s=release,
    )


_GRACE_FIELDS: tuple[tuple[str, tuple[int, int], Callable[[GraceTolerance], int]], ...] = (
    ("WaitProcessReadCMTime", WAIT_PROCESS_READ_CM_RANGE, lambda g: g.wait_process_read_cm_s),
    ("WaitDeviceResetTime", WAIT_DEVICE_RESET_RANGE, lambda g: g.wait_device_reset_s),
    ("WaitFaultSelfHealingTime", WAIT_FAULT_SELF_HEALING_RANGE, lambda g: g.wait_fault_self_healing_s),
)


def _grace(raw: object) -> GraceTolerance:
    defaults = GraceTolerance()
    if raw is None:
        return defaults
    if not isinstance(raw, Mapping):
        raise _fail("GraceTolerance", f"must be an object, got {_json_type(raw)}")
    _reject_unknown_keys(raw, _GRACE_KEYS, "GraceTolerance")
    values = []
    for key, bounds, default in _GRACE_FIELDS:
        value = _int(raw, "GraceTolerance", key, bounds)
        values.append(default(defaults) if value is None else value)
    return GraceTolerance(*values)
