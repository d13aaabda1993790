"""The fault-code tables: faultCode.json (chip codes) and SwitchFaultCode.json (switch codes).

Loading is strict where the reference is lenient: the reference (Go `encoding/json` into a
struct, component/ascend-device-plugin/pkg/common/fault_code.go `LoadFaultCode`) ignores unknown
keys and turns an unparsable code into 0 with a log line, so a typo silently drops a code to the
severity fallback. Here a broken table is rejected with a FaultPolicyError that names the key (and
the index of a bad code), so the fault-manager can keep its last good policy and say why.
What the reference accepts and we keep accepting: missing keys (an absent list is empty), `null`
lists, a code listed twice in one list, and a code listed under two levels (the more serious wins).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import TypeVar

from ascend_common.faults.levels import FaultLevel, SwitchFaultLevel

FAULT_CODE_FILE = "faultCode.json"
SWITCH_FAULT_CODE_FILE = "SwitchFaultCode.json"
_DATA_PACKAGE = "ascend_common.data"

# Main lists (contract section 7). A key absent from the file is an empty list.
MAIN_LIST_KEYS: Mapping[str, FaultLevel] = MappingProxyType(
    {
        "NotHandleFaultCodes": FaultLevel.NOT_HANDLE_FAULT,
        "SubHealthFaultCodes": FaultLevel.SUB_HEALTH_FAULT,
        "RestartRequestCodes": FaultLevel.RESTART_REQUEST,
        "RestartBusinessCodes": FaultLevel.RESTART_BUSINESS,
        "FreeRestartNPUCodes": FaultLevel.FREE_RESTART_NPU,
        "RestartNPUCodes": FaultLevel.RESTART_NPU,
        "PreSeparateNPUCodes": FaultLevel.PRE_SEPARATE_NPU,
        "SeparateNPUCodes": FaultLevel.SEPARATE_NPU,
    }
)
# Optional network lists: they only ever drive the network level (`-NetworkUnhealthy`).
NETWORK_LIST_KEYS: Mapping[str, FaultLevel] = MappingProxyType(
    {
        "NotHandleFaultNetworkCodes": FaultLevel.NOT_HANDLE_FAULT,
        "SubHealthFaultNetworkCodes": FaultLevel.SUB_HEALTH_FAULT,
        "PreSeparateNPUNetworkCodes": FaultLevel.PRE_SEPARATE_NPU,
        "SeparateNPUNetworkCodes": FaultLevel.SEPARATE_NPU,
    }
)

# Reference: component/ascend-device-plugin/pkg/common/fault_code.go `LoadSwitchFaultCode` appends
# ResetFaultCodes to SeparateFaultCodes, so a "reset" switch fault isolates like a separate one.
SWITCH_LIST_KEYS: Mapping[str, SwitchFaultLevel] = MappingProxyType(
    {
        "NotHandleFaultCodes": SwitchFaultLevel.NOT_HANDLE,
        "SubHealthFaultCodes": SwitchFaultLevel.SUB_HEALTH,
        "RestartRequestFaultCodes": SwitchFaultLevel.RESTART_REQUEST,
        "ResetFaultCodes": SwitchFaultLevel.SEPARATE,
        "PreSeparateFaultCodes": SwitchFaultLevel.PRE_SEPARATE,
        "SeparateFaultCodes": SwitchFaultLevel.SEPARATE,
    }
)

MAX_CODE_DIGITS = 9
_MAX_CODE_VALUE = 16**MAX_CODE_DIGITS
_HEX_CODE = re.compile(rf"[0-9A-F]{{1,{MAX_CODE_DIGITS}}}")
# `[0x<alarm id>,<fault id|na>,<peer: cpu|npu|L2|na>,na]`; the reference only checks brackets and
# four comma-separated parts, so the parts' vocabulary is not enforced here either.
_SWITCH_CODE = re.compile(r"\[[^\[\],\s]+(?:,[^\[\],\s]+){3}\]")


class FaultPolicyError(ValueError):
    """A fault policy document is unusable; `key` names the offending key (None: the document itself)."""

    def __init__(self, message: str, *, key: str | None = None, index: int | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.index = index


def normalize_code(code: str | int) -> str:
    """Canonical text of a chip fault code: upper-case hex, no `0x`, no leading zeros.

    Codes are matched as these strings. Dropping leading zeros makes string equality the same as
    the reference's numeric equality (it parses every code with strconv.ParseInt(s, 16, 64)):
    the packaged table spells 0x20001002 as "020001002", while the library reports the number.
    Up to 9 hex digits, because some codes exceed 32 bits (e.g. 110001024, 200001002).
    Raises ValueError for anything else.
    """
    if isinstance(code, bool):  # bool is an int; True must not quietly become code "1"
        raise ValueError(f"not a fault code: {code!r}")
    if isinstance(code, int):
        if not 0 <= code < _MAX_CODE_VALUE:
            raise ValueError(f"fault code {code} is out of range (0..{_MAX_CODE_VALUE - 1:X})")
        return f"{code:X}"
    if not isinstance(code, str):
        raise ValueError(f"not a fault code: {code!r}")
    text = code.strip().upper()
    if text.startswith("0X"):
        text = text[2:]
    if not _HEX_CODE.fullmatch(text):
        raise ValueError(f"fault code {code!r} is not 1 to {MAX_CODE_DIGITS} hex digits")
    return text.lstrip("0") or "0"


def normalize_switch_code(code: str) -> str:
    """A switch fault code as matched: surrounding whitespace dropped, otherwise exact (as the reference)."""
    if not isinstance(code, str):
        raise ValueError(f"not a switch fault code: {code!r}")
    text = code.strip()
    if not _SWITCH_CODE.fullmatch(text):
        raise ValueError(f"switch fault code {code!r} is not of the form [0x<alarm>,<fault>,<peer>,<x>]")
    return text


@dataclass(frozen=True)
class FaultCodeTable:
    """faultCode.json, resolved: code -> level, the more serious level winning.

    `levels` comes from the main lists, `network_levels` from the optional *NetworkCodes lists.
    `multi_level_codes` and `duplicate_codes` record the table's quirks so callers can log them.
    """

    levels: Mapping[str, FaultLevel] = field(default_factory=lambda: MappingProxyType({}))
    network_levels: Mapping[str, FaultLevel] = field(default_factory=lambda: MappingProxyType({}))
    multi_level_codes: Mapping[str, tuple[FaultLevel, ...]] = field(default_factory=lambda: MappingProxyType({}))
    duplicate_codes: tuple[tuple[str, str], ...] = ()
    spellings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def main_level(self, code: str | int) -> FaultLevel | None:
        """The level the main lists give `code`, None when no main list names it."""
        return self.levels.get(normalize_code(code))

    def network_list_level(self, code: str | int) -> FaultLevel | None:
        """The level the *NetworkCodes lists give `code`, None when none names it."""
        return self.network_levels.get(normalize_code(code))


@dataclass(frozen=True)
class SwitchFaultTable:
    """SwitchFaultCode.json, resolved: switch code -> level, the more serious level winning."""

    levels: Mapping[str, SwitchFaultLevel] = field(default_factory=lambda: MappingProxyType({}))
    multi_level_codes: Mapping[str, tuple[SwitchFaultLevel, ...]] = field(default_factory=lambda: MappingProxyType({}))
    duplicate_codes: tuple[tuple[str, str], ...] = ()


PolicySource = Mapping[str, object] | bytes | bytearray | str


def load_fault_code_table(obj: PolicySource) -> FaultCodeTable:
    """Build a FaultCodeTable from faultCode.json (parsed, or its bytes / text); FaultPolicyError if broken."""
    doc = _document(obj, FAULT_CODE_FILE)
    known = {**MAIN_LIST_KEYS, **NETWORK_LIST_KEYS}
    _reject_unknown_keys(doc, known, FAULT_CODE_FILE)
    main, main_multi, main_dups = _resolve(doc, MAIN_LIST_KEYS, FAULT_CODE_FILE, normalize_code, _fault_rank)
    net, net_multi, net_dups = _resolve(doc, NETWORK_LIST_KEYS, FAULT_CODE_FILE, normalize_code, _fault_rank)
    spellings: dict[str, str] = {}
    for key in _SPELLING_ORDER:
        raw = doc.get(key)
        register_spellings(spellings, raw if isinstance(raw, list) else ())
    return FaultCodeTable(
        levels=MappingProxyType(main),
        network_levels=MappingProxyType(net),
        multi_level_codes=MappingProxyType({**net_multi, **main_multi}),
        duplicate_codes=main_dups + net_dups,
        spellings=MappingProxyType(spellings),
    )


# The order LoadFaultCode registers the configured spellings in (reference fault_code.go
# registerFaultCodeFormats): the first list naming a code fixes how it is written.
_SPELLING_ORDER = (
    "NotHandleFaultCodes",
    "RestartRequestCodes",
    "RestartBusinessCodes",
    "RestartNPUCodes",
    "FreeRestartNPUCodes",
    "PreSeparateNPUCodes",
    "SeparateNPUCodes",
    "NotHandleFaultNetworkCodes",
    "PreSeparateNPUNetworkCodes",
    "SeparateNPUNetworkCodes",
    "SubHealthFaultCodes",
    "SubHealthFaultNetworkCodes",
)
_PLAIN_HEX = re.compile(f"[0-9A-Fa-f]{{1,{MAX_CODE_DIGITS}}}")


def is_plain_hex(text: str) -> bool:
    """1 to MAX_CODE_DIGITS hex digits and nothing else (no `0x`, no spaces): what Go's ParseInt(s, 16)
    takes, and a code as the reference writes it."""
    return _PLAIN_HEX.fullmatch(text) is not None


def register_spellings(spellings: dict[str, str], texts: Iterable[object]) -> None:
    """Record how the policy spells each code, lower-cased, the first spelling winning (reference
    `registerFaultCodeFormat`). Text that Go's ParseInt(s, 16) refuses (a `0x` prefix, spaces) is
    not recorded, as there."""
    for text in texts:
        if isinstance(text, str) and is_plain_hex(text):
            spellings.setdefault(normalize_code(text), text.lower())


def format_code_hex(code: str | int, *spellings: Mapping[str, str]) -> str:
    """A code as the reference writes it (`FormatFaultCodeHex`): the policy's own spelling, lower-cased,
    so a configured "020001002" keeps its leading zero; otherwise lower-case hex without leading zeros.
    The first mapping that knows the code wins (faultCode.json before faultCustomization.json)."""
    normalized = normalize_code(code)
    for known in spellings:
        if normalized in known:
            return known[normalized]
    return normalized.lower()


def load_switch_fault_table(obj: PolicySource) -> SwitchFaultTable:
    """Build a SwitchFaultTable from SwitchFaultCode.json; FaultPolicyError if broken."""
    doc = _document(obj, SWITCH_FAULT_CODE_FILE)
    _reject_unknown_keys(doc, SWITCH_LIST_KEYS, SWITCH_FAULT_CODE_FILE)
    levels, multi, dups = _resolve(doc, SWITCH_LIST_KEYS, SWITCH_FAULT_CODE_FILE, normalize_switch_code, int)
    return SwitchFaultTable(
        levels=MappingProxyType(levels), multi_level_codes=MappingProxyType(multi), duplicate_codes=dups
    )


@cache
def default_fault_code_table() -> FaultCodeTable:
    """The packaged faultCode.json (the reference's default policy), read once on first use."""
    return load_fault_code_table(_packaged(FAULT_CODE_FILE))


@cache
def default_switch_fault_table() -> SwitchFaultTable:
    """The packaged SwitchFaultCode.json, read once on first use."""
    return load_switch_fault_table(_packaged(SWITCH_FAULT_CODE_FILE))


def _packaged(name: str) -> bytes:
    return resources.files(_DATA_PACKAGE).joinpath(name).read_bytes()


def _fault_rank(level: FaultLevel) -> int:
    return level.rank


def _document(obj: PolicySource, source: str) -> Mapping[str, object]:
    parsed: object = obj
    if isinstance(obj, (bytes, bytearray, str)):
        try:
            parsed = json.loads(obj)
        # ValueError: besides syntax and encoding errors, an integer literal over 4300 digits;
        # RecursionError: nesting deeper than the parser's stack.
        except (ValueError, RecursionError) as exc:
            raise FaultPolicyError(f"{source}: not valid JSON: {exc}") from exc
    if not isinstance(parsed, Mapping):
        raise FaultPolicyError(f"{source}: expected a JSON object, got {type(parsed).__name__}")
    return parsed


def _reject_unknown_keys(doc: Mapping[str, object], known: Mapping[str, object], source: str) -> None:
    for key in doc:
        if key not in known:
            raise FaultPolicyError(f"{source}: unknown key {key!r}", key=str(key))


L = TypeVar("L", FaultLevel, SwitchFaultLevel)
_Normalizer = Callable[[str], str]


def _resolve(
    doc: Mapping[str, object],
    keys: Mapping[str, L],
    source: str,
    normalize: _Normalizer,
    rank: Callable[[L], int],
) -> tuple[dict[str, L], dict[str, tuple[L, ...]], tuple[tuple[str, str], ...]]:
    levels: dict[str, L] = {}
    listed_under: dict[str, list[L]] = {}
    duplicates: list[tuple[str, str]] = []
    for key, level in keys.items():
        seen: set[str] = set()
        for code in _codes(doc, key, source, normalize):
            if code in seen:
                duplicates.append((key, code))
                continue
            seen.add(code)
            listed_under.setdefault(code, []).append(level)
            current = levels.get(code)
            if current is None or rank(level) > rank(current):
                levels[code] = level
    multi = {code: tuple(found) for code, found in listed_under.items() if len(set(found)) > 1}
    return levels, multi, tuple(duplicates)


def _codes(doc: Mapping[str, object], key: str, source: str, normalize: _Normalizer) -> list[str]:
    raw = doc.get(key)
    if raw is None:  # absent or JSON null: an empty list, as Go's encoding/json leaves a nil slice
        return []
    if not isinstance(raw, list):
        raise FaultPolicyError(f"{source}: {key} must be a list of strings, got {type(raw).__name__}", key=key)
    codes: list[str] = []
    for index, item in enumerate(raw):
        if not isinstance(item, str):
            raise FaultPolicyError(
                f"{source}: {key}[{index}] must be a string, got {type(item).__name__}", key=key, index=index
            )
        try:
            codes.append(normalize(item))
        except ValueError as exc:
            raise FaultPolicyError(f"{source}: {key}[{index}]: {exc}", key=key, index=index) from exc
    return codes
