"""The fields a 950 (A5) chip's URMA EIDs encode: die, port, function entity (fe), PG, UBoE and its IPv4.

An EID is 16 bytes, written as 32 lower-case hex digits (`RawBytesToEidString`). Two readings
exist in the reference and both are ported, because they disagree and neither is confirmed on
hardware (issue 25, reference bug 3):
- the mesh reading (pkg/server/eid.go), used for pods and servers: die and port from byte 5,
  fe from byte 6, the UBoE flag from the high nibble of byte 7;
- the card reading (pkg/server/npu_base_v2.go `getFeIDByEid`, `getDieIdAndPortId`,
  `checkEidIsUsedForD2D`, `createRankAddrItem`), used for Atlas 350 cards: fe from bits 5..9 of
  the first 8 bytes, die and port from the last 3 hex digits.

The reference parses with strconv and answers -1 for a digit that is not hex; ours refuses such
an EID up front (ValueError naming it), since one can only come from a broken driver or caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

EID_HEX_LEN: Final = 32
_EID = re.compile(r"[0-9a-f]{32}")

PG_PORT: Final = 0x3F  # the port field of a port-group (PG) EID
_DIE_MASK, _DIE_SHIFT = 0xC, 2
_PORT_MASK = 0x3F
_FE_MASK = 0x7F
_UBOE_MASK = 0xC
_LINK_LOCAL_FIRST_BYTE = 0xFE  # a UBoE address starting fe is link-local: no rank address

# The card reading's constants (pkg/common/constants_v2.go).
_CARD_FE_SHIFT, _CARD_FE_MASK = 5, 0x1F
_CARD_DIE_BIT = 0x04
_CARD_PORT_MASK, _CARD_PORT_SHIFT = 0x7F, 3
_PHY_LIMIT, _PHY_PORTS_PER_DIE = 144, 9
_LOGIC_LOWER, _LOGIC_UPPER, _LOGIC_PORTS_PER_DIE = 181, 212, 2
_DIES_PER_CHIP = 2


def check_eid(eid: str) -> str:
    """`eid` if it is 32 lower-case hex digits, as the reference writes them; else ValueError."""
    if not isinstance(eid, str) or not _EID.fullmatch(eid):
        raise ValueError(f"EID {eid!r} is not {EID_HEX_LEN} lower-case hex digits")
    return eid


# --- The mesh reading (eid.go) --------------------------------------------------------------------


def eid_die(eid: str) -> int:
    """`GetDieIdByEid`: bits 3..2 of hex digit 10."""
    return (int(check_eid(eid)[10], 16) & _DIE_MASK) >> _DIE_SHIFT


def eid_port(eid: str) -> int:
    """`GetPhyPortByEid`: the low 6 bits of byte 5 (hex 10..11); 0x3F is the PG EID."""
    return int(check_eid(eid)[10:12], 16) & _PORT_MASK


def eid_fe(eid: str) -> int:
    """`GetFeIdByEid`: the low 7 bits of byte 6 (hex 12..13)."""
    return int(check_eid(eid)[12:14], 16) & _FE_MASK


def is_pg_eid(eid: str) -> bool:
    """`IsPgEid`: the port field is 0x3F."""
    return eid_port(eid) == PG_PORT


def is_uboe_eid(eid: str) -> bool:
    """`IsUboeEid`: bits 3 and 2 of hex digit 14 both set."""
    return int(check_eid(eid)[14], 16) & _UBOE_MASK == _UBOE_MASK


def uboe_ipv4(eid: str) -> str | None:
    """`GetUboeIPv4ByEid`: hex[12:14].hex[24:26].hex[26:28].hex[28:30]; None for a link-local one
    (first byte 0xFE), which the reference skips."""
    check_eid(eid)
    octets = [int(eid[i : i + 2], 16) for i in (12, 24, 26, 28)]
    if octets[0] == _LINK_LOCAL_FIRST_BYTE:
        return None
    return ".".join(str(o) for o in octets)


def pg_eid(eids: Sequence[str]) -> str | None:
    """`GetPgEid`: the first PG EID of a list, None when there is none."""
    return next((e for e in eids if is_pg_eid(e)), None)


@dataclass(frozen=True, slots=True)
class UrmaEids:
    """One URMA device of a chip, as dcmi lists it: its index and its EIDs in the driver's order."""

    index: int
    eids: tuple[str, ...]

    def __post_init__(self) -> None:
        for eid in self.eids:
            check_eid(eid)


@dataclass(frozen=True, slots=True)
class ParsedEid:
    """`ParsedEid`: one EID's fields."""

    eid: str
    die: int
    fe: int
    port: int
    is_pg: bool


@dataclass(frozen=True, slots=True)
class ParsedUrma:
    """`ParsedUrma`: a URMA device's die, fe and UBoE flag (from its first EID; -1, -1, False with
    none), its EIDs, its PG EID (the last one, as the reference's loop overwrites it) and, for a
    UBoE device, the first non-link-local IPv4 among its EIDs ("" when none)."""

    index: int
    eids: tuple[ParsedEid, ...]
    pg_eid: str
    die: int
    fe: int
    is_uboe: bool
    ipv4: str


def parse_urma(device: UrmaEids) -> ParsedUrma:
    """`ParseUrmaDevices` for one device."""
    parsed = tuple(ParsedEid(e, eid_die(e), eid_fe(e), eid_port(e), is_pg_eid(e)) for e in device.eids)
    pg = next((p.eid for p in reversed(parsed) if p.is_pg), "")
    first = device.eids[0] if device.eids else None
    uboe = first is not None and is_uboe_eid(first)
    ipv4 = ""
    if uboe:
        ipv4 = next((ip for ip in (uboe_ipv4(e) for e in device.eids) if ip is not None), "")
    return ParsedUrma(
        index=device.index, eids=parsed, pg_eid=pg,
        die=eid_die(first) if first is not None else -1, fe=eid_fe(first) if first is not None else -1,
        is_uboe=uboe, ipv4=ipv4,
    )  # fmt: skip


def parse_urma_devices(devices: Sequence[UrmaEids]) -> list[ParsedUrma]:
    """`ParseUrmaDevices`: every device, in order."""
    return [parse_urma(d) for d in devices]


# --- The card reading (npu_base_v2.go) -----------------------------------------------------------


def card_fe(eid: str) -> int:
    """`getFeIDByEid`: bits 5..9 of the first 8 bytes read big-endian."""
    return (int(check_eid(eid)[:16], 16) >> _CARD_FE_SHIFT) & _CARD_FE_MASK


def card_die(eid: str) -> int:
    """`getDieIdByEid` (npu_base_v2.go): 1 when bit 2 of the third-to-last hex digit is set."""
    return 1 if int(check_eid(eid)[-3], 16) & _CARD_DIE_BIT else 0


def card_port(eid: str) -> int:
    """`getPortIdBydEid`: the last byte without its top bit, shifted right by 3."""
    return (int(check_eid(eid)[-2:], 16) & _CARD_PORT_MASK) >> _CARD_PORT_SHIFT


def card_d2d(eid: str) -> bool:
    """`checkEidIsUsedForD2D`: bit 11 of the last two bytes is clear."""
    return (int(check_eid(eid)[-4:], 16) >> 11) & 1 == 0


def card_plane_id(eid: str) -> str:
    """`createRankAddrItem`'s plane of a UB address: the die its last byte's port number falls on,
    physical ports 1..144 by nine, logical ports 181..212 by two; "0" for anything else. Go's
    integer division truncates towards zero, so byte 0 is die 0 (Python's // would give die 1)."""
    value = int(check_eid(eid)[-2:], 16)
    if value <= _PHY_LIMIT:
        return str(int((value - 1) / _PHY_PORTS_PER_DIE) % _DIES_PER_CHIP)
    if _LOGIC_LOWER <= value <= _LOGIC_UPPER:
        return str((value - _LOGIC_LOWER) // _LOGIC_PORTS_PER_DIE % _DIES_PER_CHIP)
    return "0"
