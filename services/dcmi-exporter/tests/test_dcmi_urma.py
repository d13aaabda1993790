"""URMA devices of a 950 chip through ctypes, over the C double of libdcmi.so (issue 25 part A).

The calls (`dcmiv2_get_urma_device_cnt`, then `dcmiv2_get_eid_list_by_urma_dev_index` per index
into an array of 32 `dcmi_urma_eid_info_t`) and the reading rules are the reference's
DcV2Manager.DcGetUrmaDevEidListAll: a failing index is skipped, a chip whose every index fails is
unread, and what was read is kept for good.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypeAlias

import pytest
from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import ChipStatic, UrmaDevice
from dcmi_exporter.backends.dcmi import DcmiBackend
from pydantic import ValidationError

# The fixtures live beside the C double; the repo root is on sys.path (pytest `pythonpath`).
import tests.cdouble.fixtures as _fx

cdouble_build_dir = _fx.cdouble_build_dir
dcmi_double_path = _fx.dcmi_double_path
dcmi_double = _fx.dcmi_double

Control: TypeAlias = Any  # tests/cdouble/fixtures.py:DoubleControl

# The "Must show" 1D-pod chip: {fe1, die0: ports 1, 2, PG}, {fe2, die0: 5, PG}, {fe2, die1: 7, PG}.
POD_DEVICES = [
    ["00000000000101000000000000000000", "00000000000201000000000000000000", "00000000003f0100000000000000000a"],
    ["00000000000502000000000000000000", "00000000003f02000000000000000000"],
    ["00000000004702000000000000000000", "00000000007f02000000000000000000"],
]
UBOE_EID = "0000000000000ac00000000014000105"  # the UBoE example, 10.20.0.1
A5_BOARD = 0x50


def a5_double(double: Control) -> None:
    """A 950 node on the v2 library (dcmi_init fails), as test_dcmi_backend's."""
    double.set_rc("dcmi_init", -1, -8255)
    double.set_str("chip_name", -1, "Ascend950PR")
    double.set_int("board_id", -1, A5_BOARD)


def make_backend(double: Control) -> DcmiBackend:
    backend = DcmiBackend(double.path, numa_root=Path("/nonexistent"))
    backend.init()
    return backend


def a5_chip(backend: DcmiBackend, logic: int) -> ChipAddress:
    return next(c for c in backend.discover() if c.logic_id == logic)


def test_eids_come_back_as_the_library_wrote_them_in_index_order(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    for index, eids in enumerate(POD_DEVICES):
        dcmi_double.set_urma(3, index, eids)
    backend = make_backend(dcmi_double)
    static = backend.read_static(a5_chip(backend, 3))
    assert static.urma == [UrmaDevice(index=i, eids=eids) for i, eids in enumerate(POD_DEVICES)]
    assert dcmi_double.call_count("dcmiv2_get_urma_device_cnt", 3) == 1
    assert dcmi_double.call_count("dcmiv2_get_eid_list_by_urma_dev_index", 3) == 3
    assert dcmi_double.call_count("dcmi_get_urma_device_cnt") == 0  # v2 library: the v2 symbols only


def test_32_eids_on_one_device_cross_the_24_byte_stride(dcmi_double: Control) -> None:
    """A 20-byte (packed) declaration would read the second EID from the first one's tail: each of the
    32 EIDs is distinct, so every one must come back whole."""
    a5_double(dcmi_double)
    eids = [f"{i:02x}" * 15 + f"{255 - i:02x}" for i in range(32)]
    dcmi_double.set_urma(0, 0, eids)
    backend = make_backend(dcmi_double)
    assert backend.read_static(a5_chip(backend, 0)).urma == [UrmaDevice(index=0, eids=eids)]


def test_uboe_eid_keeps_its_hex_digits_lower_case(dcmi_double: Control) -> None:
    # TestRawBytesToEidString: the raw bytes as lower-case hex (hex.EncodeToString)
    a5_double(dcmi_double)
    dcmi_double.set_urma(1, 0, [UBOE_EID.upper()])
    backend = make_backend(dcmi_double)
    assert backend.read_static(a5_chip(backend, 1)).urma == [UrmaDevice(index=0, eids=[UBOE_EID])]


def test_a_chip_without_urma_devices_reads_an_empty_list(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    backend = make_backend(dcmi_double)
    assert backend.read_static(a5_chip(backend, 0)).urma == []


def test_urma_is_read_once_and_kept(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_urma(0, 0, POD_DEVICES[1])
    backend = make_backend(dcmi_double)
    chip = a5_chip(backend, 0)
    first = backend.read_static(chip).urma
    dcmi_double.set_urma(0, 0, POD_DEVICES[2])  # the driver's answer changes: the first one is kept
    dcmi_double.set_rc("dcmiv2_get_urma_device_cnt", 0, -8005)
    assert backend.read_static(chip).urma == first == [UrmaDevice(index=0, eids=POD_DEVICES[1])]
    assert dcmi_double.call_count("dcmiv2_get_urma_device_cnt", 0) == 1


def test_a_failed_read_is_none_logged_once_and_asked_again(
    dcmi_double: Control, caplog: pytest.LogCaptureFixture
) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_urma(2, 0, POD_DEVICES[1])
    dcmi_double.set_rc("dcmiv2_get_urma_device_cnt", 2, -8005)
    backend = make_backend(dcmi_double)
    chip = a5_chip(backend, 2)
    with caplog.at_level(logging.WARNING):
        first, again = backend.read_static(chip), backend.read_static(chip)
    assert first.urma is None and again.urma is None
    assert first.chip_name.value == "Ascend950PR"  # the chip's other facts still read
    warnings = [r for r in caplog.records if r.getMessage() == "urma devices unreadable"]
    assert len(warnings) == 1 and getattr(warnings[0], "logic_id", None) == 2
    assert dcmi_double.call_count("dcmiv2_get_urma_device_cnt", 2) == 2
    dcmi_double.set_rc("dcmiv2_get_urma_device_cnt", 2, 0)
    assert backend.read_static(chip).urma == [UrmaDevice(index=0, eids=POD_DEVICES[1])]


def test_a_failing_index_is_skipped_and_the_others_kept(dcmi_double: Control) -> None:
    """The double counts 5 devices but stores 4: index 4 fails, and DcGetUrmaDevEidListAll skips it."""
    a5_double(dcmi_double)
    for index, eids in enumerate(POD_DEVICES):
        dcmi_double.set_urma(0, index, eids)
    dcmi_double.set_urma(0, 3, [UBOE_EID])
    dcmi_double.set_int("urma_count", 0, 5)  # index 4: counted, never stored, refused by the double
    backend = make_backend(dcmi_double)
    urma = backend.read_static(a5_chip(backend, 0)).urma
    assert urma is not None and [d.index for d in urma] == [0, 1, 2, 3]


def test_every_index_failing_is_unread(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_urma(0, 0, POD_DEVICES[0])
    dcmi_double.set_rc("dcmiv2_get_eid_list_by_urma_dev_index", 0, -8001)
    backend = make_backend(dcmi_double)
    assert backend.read_static(a5_chip(backend, 0)).urma is None


def test_a_device_count_above_the_bound_is_refused(dcmi_double: Control) -> None:
    """MaxUrmaDevCnt (128): a larger count is a broken answer, never 129 calls."""
    a5_double(dcmi_double)
    dcmi_double.set_int("urma_count", 0, 129)
    backend = make_backend(dcmi_double)
    assert backend.read_static(a5_chip(backend, 0)).urma is None
    assert dcmi_double.call_count("dcmiv2_get_eid_list_by_urma_dev_index", 0) == 0


def test_urma_is_not_asked_of_other_families(dcmi_double: Control) -> None:
    dcmi_double.set_urma(0, 0, POD_DEVICES[0])
    backend = make_backend(dcmi_double)  # a 910B node on the v1 library
    assert backend.read_static(a5_chip(backend, 0)).urma is None
    assert dcmi_double.call_count("dcmi_get_urma_device_cnt") == 0


def test_v1_library_950_asks_the_v1_symbols_by_card_and_device(dcmi_double: Control) -> None:
    """The reference's DcManager has the calls too, addressed by (card, device)."""
    dcmi_double.set_str("chip_name", -1, "Ascend950PR")
    dcmi_double.set_int("board_id", -1, A5_BOARD)
    dcmi_double.set_urma(1, 0, POD_DEVICES[2])
    backend = make_backend(dcmi_double)
    assert backend.generation.name == "dcmi"
    assert backend.read_static(a5_chip(backend, 1)).urma == [UrmaDevice(index=0, eids=POD_DEVICES[2])]
    assert dcmi_double.call_count("dcmi_get_urma_device_cnt", 1) == 1


def test_config_file_line_sets_eids(dcmi_double: Control, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "a5.conf"
    config.write_text(
        "rc dcmi_init * -8255\nchip 0 0 0 1\nstr chip_name * Ascend950PR\nint board_id * 0x50\n"
        f"urma 0 0 {','.join(POD_DEVICES[0])}\nurma 0 1 {UBOE_EID}\n"
    )
    monkeypatch.setenv("DCMI_DOUBLE_CONFIG", str(config))
    backend = make_backend(dcmi_double)
    assert backend.read_static(a5_chip(backend, 0)).urma == [
        UrmaDevice(index=0, eids=POD_DEVICES[0]),
        UrmaDevice(index=1, eids=[UBOE_EID]),
    ]


def test_bad_config_lines_are_refused(dcmi_double: Control, tmp_path: Path) -> None:
    for bad in ("urma 0 0 0011", "urma 0 9 " + UBOE_EID, "urma 0 0 " + "zz" * 16, "urma 0 -1 " + UBOE_EID):
        config = tmp_path / "bad.conf"
        config.write_text(bad + "\n")
        assert dcmi_double.load_config(config) == 1, bad


@pytest.mark.parametrize(
    "bad", ["0000", "00000000000101000000000000000000ff", "0000000000010100000000000000000g", UBOE_EID.upper()]
)
def test_the_schema_refuses_an_eid_that_is_not_32_lower_case_hex_digits(bad: str) -> None:
    with pytest.raises(ValidationError):
        UrmaDevice(index=0, eids=[bad])
    assert UrmaDevice(index=0, eids=[UBOE_EID]).eids == [UBOE_EID]


def test_old_payloads_without_urma_parse() -> None:
    """An exporter that predates the field: the consumer reads None."""
    payload = {
        name: {"status": "ok", "value": "x" if name.startswith("chip") or name in ("product_type", "device_ip") else 1}
        for name in (
            "chip_type",
            "chip_name",
            "chip_version",
            "aicore",
            "board_id",
            "product_type",
            "partner_card",
            "numa_node",
            "device_ip",
        )
    }
    assert ChipStatic.model_validate(payload).urma is None
