"""EID fields, ported from the reference's pkg/server/eid_test.go (the mesh reading) and the card
reading's cases of npu_base_v2_test.go, plus issue 25's "Must show" EIDs.

The reference's helpers build EIDs by setting hex digits of a zero string; `eid_with` does the same.
Where the reference feeds a non-hex digit and expects -1 / false / an error, ours refuses the EID
(ValueError naming it): such an EID is bad input, not a value.
"""

from __future__ import annotations

import pytest
from ascend_device_plugin.model.eid import (
    UrmaEids,
    card_d2d,
    card_die,
    card_fe,
    card_plane_id,
    card_port,
    check_eid,
    eid_die,
    eid_fe,
    eid_port,
    is_pg_eid,
    is_uboe_eid,
    parse_urma,
    parse_urma_devices,
    pg_eid,
    uboe_ipv4,
)

ZERO = "0" * 32


def eid_with(**digits: str) -> str:
    """A zero EID with the hex digits at the given offsets (`at10="4"`) replaced."""
    chars = list(ZERO)
    for key, text in digits.items():
        start = int(key.removeprefix("at"))
        chars[start : start + len(text)] = text
    return "".join(chars)


# --- Must show (issue 25) -----------------------------------------------------------------------


def test_must_show_eids() -> None:
    eid = "00000000004702000000000000000000"
    assert (eid_die(eid), eid_port(eid), eid_fe(eid)) == (1, 7, 2)
    assert not is_pg_eid(eid) and not is_uboe_eid(eid)
    assert is_pg_eid("00000000007f02000000000000000000")
    uboe = "0000000000000ac00000000014000105"
    assert is_uboe_eid(uboe) and uboe_ipv4(uboe) == "10.20.0.1"


# --- eid_test.go ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("digits", "port"), [("0a", 10), ("ff", 63), ("3f", 63), ("47", 7)])
def test_get_phy_port_by_eid(digits: str, port: int) -> None:  # TestGetPhyPortByEid
    assert eid_port(eid_with(at10=digits)) == port


def test_get_pg_eid() -> None:  # TestGetPgEid
    normal, pg = eid_with(at10="01"), eid_with(at10="3f")
    assert pg_eid([normal, pg]) == pg
    assert pg_eid([normal]) is None


@pytest.mark.parametrize(("digits", "expected"), [("3f", True), ("01", False), ("7f", True), ("3e", False)])
def test_is_pg_eid(digits: str, expected: bool) -> None:  # TestIsPgEid
    assert is_pg_eid(eid_with(at10=digits)) is expected


@pytest.mark.parametrize(("nibble", "die"), [("4", 1), ("0", 0), ("8", 2), ("c", 3), ("3", 0)])
def test_get_die_id_by_eid(nibble: str, die: int) -> None:  # TestGetDieIdByEid
    assert eid_die(eid_with(at10=nibble)) == die


@pytest.mark.parametrize(("digits", "fe"), [("0a", 10), ("82", 2), ("7f", 127)])
def test_get_fe_id_by_eid(digits: str, fe: int) -> None:  # TestGetFeIdByEid
    assert eid_fe(eid_with(at12=digits)) == fe


@pytest.mark.parametrize(("nibble", "expected"), [("c", True), ("0", False), ("f", True), ("8", False), ("4", False)])
def test_is_uboe_eid(nibble: str, expected: bool) -> None:  # TestIsUboeEid
    assert is_uboe_eid(eid_with(at12="08", at14=nibble)) is expected


def test_get_uboe_ipv4_by_eid() -> None:  # TestGetUboeIPv4ByEid
    # The reference's helper writes the tail into the last 8 digits; the address takes the first 3 bytes of it.
    assert uboe_ipv4(eid_with(at12="0a", at24="01020304")) == "10.1.2.3"
    assert uboe_ipv4(eid_with(at12="fe", at24="01020304")) is None  # link-local: skipped


def test_urma_device_methods() -> None:  # TestUrmaDeviceMethods
    eid = eid_with(at10="4", at12="08", at14="c", at24="01020304")
    parsed = parse_urma(UrmaEids(0, (eid,)))
    assert (parsed.die, parsed.fe, parsed.is_uboe, parsed.ipv4) == (1, 8, True, "8.1.2.3")
    empty = parse_urma(UrmaEids(1, ()))  # "empty EidList"
    assert (empty.die, empty.fe, empty.is_uboe, empty.ipv4, empty.pg_eid) == (-1, -1, False, "", "")


def test_parse_urma_devices() -> None:  # TestParseUrmaDevices
    uboe = eid_with(at10="4", at12="08", at14="c", at24="08010203")
    pg = eid_with(at10="3f")
    [parsed] = parse_urma_devices([UrmaEids(0, (uboe, pg))])
    assert (parsed.die, parsed.fe, parsed.is_uboe, parsed.pg_eid, len(parsed.eids)) == (1, 8, True, pg, 2)
    assert parsed.ipv4 == "8.8.1.2"
    assert [e.is_pg for e in parsed.eids] == [False, True]


def test_a_uboe_device_takes_the_first_non_link_local_address() -> None:
    link_local = eid_with(at12="fe", at14="c", at24="01020304")
    usable = eid_with(at12="0b", at14="c", at24="01020304")
    assert parse_urma(UrmaEids(0, (link_local, usable))).ipv4 == "11.1.2.3"
    assert parse_urma(UrmaEids(0, (link_local,))).ipv4 == ""


def test_the_device_fields_come_from_its_first_eid_and_the_pg_eid_is_the_last() -> None:
    first_pg, second_pg = eid_with(at10="3f", at12="02"), eid_with(at10="7f", at12="05")
    parsed = parse_urma(UrmaEids(3, (eid_with(at10="45", at12="01"), first_pg, second_pg)))
    assert (parsed.index, parsed.die, parsed.fe, parsed.pg_eid) == (3, 1, 1, second_pg)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "0" * 31,
        "0" * 33,
        "0" * 40,  # the reference's tests use 40 digits; a dcmi EID is 16 bytes
        "0" * 10 + "Z0" + "0" * 20,  # the reference's "invalid" cases: not hex
        "0" * 12 + "0g" + "0" * 18,
        "0000000000470a000000000000000000".upper(),
    ],
)
def test_an_eid_that_is_not_32_lower_case_hex_digits_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not 32 lower-case hex digits"):
        check_eid(bad)
    with pytest.raises(ValueError, match="not 32 lower-case hex digits"):
        UrmaEids(0, (bad,))


# --- The card reading (npu_base_v2_test.go) ------------------------------------------------------


def test_npu_base_method_get_fe_id_by_eid() -> None:  # TestNpuBaseMethodGetFeIDByEid: byte 7 = 1 << 5
    assert card_fe("00000000000000200000000000000000") == 1
    assert card_fe(ZERO) == 0
    assert card_fe("00000000000003e00000000000000000") == 0x1F


@pytest.mark.parametrize(
    ("tail", "die", "port"),
    [
        ("f28", 1, 5),  # TestGetDieIdAndPortId "valid": ...f0f28
        ("028", 0, 5),  # "dieId bit 3 is zero": ...f0028
        ("4a8", 1, 5),  # the top bit of the last byte is dropped
        ("3ff", 0, 15),
    ],
)
def test_get_die_id_and_port_id(tail: str, die: int, port: int) -> None:
    eid = "0" * 29 + tail
    assert (card_die(eid), card_port(eid)) == (die, port)


def test_npu_base_method_get_eid_list_by_fe_id_and_rank_level_d2d_bit() -> None:
    # TestNpuBaseMethodGetEidListByFeIDAndRankLevel "04": byte 14 = 0x08 marks an EID not for die-to-die.
    assert card_d2d(ZERO)
    assert not card_d2d("0" * 28 + "0800")
    assert card_port("0" * 30 + "51") == 10  # "05": 0x51 is the PG port (over the limit of 8)


@pytest.mark.parametrize(
    ("last_byte", "plane"),
    [(0, "0"), (1, "0"), (9, "0"), (10, "1"), (18, "1"), (19, "0"), (144, "1"), (145, "0"),
     (180, "0"), (181, "0"), (183, "1"), (185, "0"), (212, "1"), (213, "0"), (255, "0")],
)  # fmt: skip
def test_npu_base_method_create_rank_addr_item_plane(last_byte: int, plane: str) -> None:
    # TestNpuBaseMethodCreateRankAddrItem, and the die arithmetic of createRankAddrItem; byte 0 is die 0
    # because Go's division truncates towards zero.
    assert card_plane_id("0" * 30 + f"{last_byte:02x}") == plane
