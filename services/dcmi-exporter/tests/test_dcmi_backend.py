"""DcmiBackend against the C double of libdcmi.so: it reports exactly what the double returns.

The double (tests/cdouble/libdcmi_double.c) is built once per session; every test starts from its
default model (cards 0 and 1 with two chips each, logic 0..3 -> phy 2, 3, 0, 1) and sets the
values it checks to something other than the defaults, so that a test can only pass if the
value really travelled through the C call.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TypeAlias

import pytest
from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import Assertion, ChipProcess, Hbm, ResetChannel, Utilization, Vnpu
from ascend_common.schemas.reading import ReadStatus
from dcmi_exporter.backends.base import RawFaultEvent, RawSwitchEvent
from dcmi_exporter.backends.dcmi import DcmiBackend, format_code
from dcmi_exporter.backends.errors import (
    BadParameter,
    CallTimeout,
    CardDropped,
    DcmiError,
    NotSupported,
    ResetFailed,
)
from dcmi_exporter.node.calls import CallGuard

from tests.support.waiting import WAIT_S, until

REPO = Path(__file__).resolve().parents[3]


# The fixtures live beside the C double; the repo root is on sys.path (pytest `pythonpath`).
import tests.cdouble.fixtures as _fx  # noqa: E402

cdouble_build_dir = _fx.cdouble_build_dir
dcmi_double_path = _fx.dcmi_double_path
dcmi_double_nosub_path = _fx.dcmi_double_nosub_path
dcmi_double = _fx.dcmi_double
dcmi_double_nosub = _fx.dcmi_double_nosub
numa_root = _fx.numa_root

# tests/cdouble/fixtures.py:DoubleControl, loaded by path so not importable for type checking.
Control: TypeAlias = Any

DEFAULT_CHIPS = [
    ChipAddress(card_id=0, device_id=0, logic_id=0, phy_id=2),
    ChipAddress(card_id=0, device_id=1, logic_id=1, phy_id=3),
    ChipAddress(card_id=1, device_id=0, logic_id=2, phy_id=0),
    ChipAddress(card_id=1, device_id=1, logic_id=3, phy_id=1),
]


def make_backend(double: Control, numa: Path | None = None) -> DcmiBackend:
    backend = DcmiBackend(double.path, numa_root=numa or Path("/nonexistent"), clock=lambda: 1_700_000_000.5)
    backend.init()
    return backend


def chip(logic: int) -> ChipAddress:
    return DEFAULT_CHIPS[logic]


# --------------------------------------------------------------------------------- inventory


def test_discover_multi_chip_cards_with_logic_ids_other_than_phy_ids(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    assert backend.discover() == DEFAULT_CHIPS
    assert backend.kind == "dcmi" and backend.profile is None


def test_discover_follows_an_uneven_layout(dcmi_double: Control) -> None:
    # Non-contiguous card ids, 2 / 1 / 3 chips per card, logic ids neither in card order nor phy order.
    layout = [(4, 0, 5, 1), (4, 1, 0, 7), (9, 0, 3, 0), (2, 0, 1, 2), (2, 1, 2, 6), (2, 2, 4, 3)]
    dcmi_double.set_layout(layout)
    backend = make_backend(dcmi_double)
    expected = sorted(
        (ChipAddress(card_id=c, device_id=d, logic_id=lg, phy_id=p) for c, d, lg, p in layout),
        key=lambda a: a.logic_id,
    )
    assert backend.discover() == expected
    # the logic id is the OUT-param (first argument); the double counted one call per chip
    assert dcmi_double.call_count("dcmi_get_device_logic_id") == len(layout)


def test_discover_raises_the_typed_error_of_a_failing_call(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_get_card_list", -1, -8005)
    backend = make_backend(dcmi_double)
    with pytest.raises(DcmiError) as err:
        backend.discover()
    assert err.value.code == -8005


def test_version(dcmi_double: Control) -> None:
    dcmi_double.set_str("version", -1, "25.0.rc1.b030")
    backend = make_backend(dcmi_double)
    version = backend.version()
    assert version.status is ReadStatus.OK and version.value == "25.0.rc1.b030"
    dcmi_double.set_rc("dcmi_get_dcmi_version", -1, -8255)
    assert backend.version().status is ReadStatus.UNSUPPORTED


def test_missing_library_fails_init_with_a_typed_error(tmp_path: Path) -> None:
    backend = DcmiBackend(tmp_path / "libdcmi.so")
    with pytest.raises(DcmiError):
        backend.init()


# --------------------------------------------------------------------------------- static facts


def test_read_static_reports_what_the_double_returns(dcmi_double: Control, numa_root: Path) -> None:
    dcmi_double.set_str("chip_name", 1, "910B4")
    dcmi_double.set_str("chip_type", 1, "AscendX")
    dcmi_double.set_str("chip_ver", 1, "V2")
    dcmi_double.set_int("aicore", 1, 24)
    dcmi_double.set_int("board_id", 1, 0x33)
    dcmi_double.set_str("product_type", 1, "Atlas 300I Duo")
    dcmi_double.set_int("brother_card", 1, 7)
    dcmi_double.set_str("affinity", 1, "16-31")
    dcmi_double.set_str("ip", 1, "10.20.30.41")
    backend = make_backend(dcmi_double, numa_root)

    static = backend.read_static(chip(1))
    assert static.chip_name.value == "910B4"
    assert static.chip_type.value == "AscendX"
    assert static.chip_version.value == "V2"
    assert static.aicore.value == 24
    assert static.board_id.value == 0x33
    assert static.product_type.value == "Atlas 300I Duo"
    assert static.partner_card.value == 7
    assert static.numa_node.value == 1
    assert static.device_ip.value == "10.20.30.41"

    other = backend.read_static(chip(0))  # untouched chip: the double's defaults, not chip 1's values
    assert other.chip_name.value == "910B3"
    assert other.numa_node.value == 1  # default affinity of phy 2: CPUs 16-31
    assert backend.read_static(chip(2)).numa_node.value == 0  # phy 0: CPUs 0-15
    assert other.device_ip.value == "192.168.100.102"


def test_numa_node_comes_from_the_affinity_cpus(dcmi_double: Control, numa_root: Path) -> None:
    dcmi_double.set_str("affinity", 0, "0-3,8-11")
    dcmi_double.set_str("affinity", 2, "12-20")  # spans both nodes: the larger overlap wins
    dcmi_double.set_str("affinity", 3, "")  # the double answers -8255
    backend = make_backend(dcmi_double, numa_root)
    assert backend.read_static(chip(0)).numa_node.value == 0
    assert backend.read_static(chip(2)).numa_node.value == 1
    unsupported = backend.read_static(chip(3)).numa_node
    assert unsupported.status is ReadStatus.UNSUPPORTED and unsupported.code == -8255


def test_numa_node_is_unsupported_without_sysfs_nodes(dcmi_double: Control, tmp_path: Path) -> None:
    backend = make_backend(dcmi_double, tmp_path)  # no node<N> directories
    numa = backend.read_static(chip(0)).numa_node
    assert numa.status is ReadStatus.UNSUPPORTED


def test_device_ip_v6_and_missing(dcmi_double: Control) -> None:
    dcmi_double.set_str("ip", 2, "fd00::17:2")
    dcmi_double.set_str("ip", 3, "")  # no address: the double answers -8255
    backend = make_backend(dcmi_double)
    assert backend.read_static(chip(2)).device_ip.value == "fd00::17:2"
    assert backend.read_static(chip(3)).device_ip.status is ReadStatus.UNSUPPORTED


def test_chip_info_falls_back_to_v1(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_get_device_chip_info_v2", 0, -8255)
    dcmi_double.set_str("chip_name", 0, "310P3")
    backend = make_backend(dcmi_double)
    static = backend.read_static(chip(0))
    assert static.chip_name.value == "310P3"
    assert dcmi_double.call_count("dcmi_get_device_chip_info", 0) == 1


def test_chip_info_failure_marks_the_four_fields_and_nothing_else(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_get_device_chip_info_v2", 0, -8005)
    dcmi_double.set_rc("dcmi_get_device_chip_info", 0, -8255)
    backend = make_backend(dcmi_double)
    static = backend.read_static(chip(0))
    for field in (static.chip_name, static.chip_type, static.chip_version, static.aicore):
        assert field.status is ReadStatus.ERROR and field.code == -8005
    assert static.board_id.is_ok and static.product_type.is_ok


# --------------------------------------------------------------------------------- A3 super pod

A3_BOARD = 0xB0  # an Atlas A3 board id (the reference's a3BoardIds)


def a3_double(double: Control) -> None:
    """Every chip of the double an A3 chip, in super pod 7 as server 5, SDIDs as the A3 encodes them."""
    double.set_int("board_id", -1, A3_BOARD)
    double.set_int("super_pod_id", -1, 7)
    double.set_int("server_id", -1, 5)
    for logic, address in enumerate(DEFAULT_CHIPS):
        double.set_int("sdid", logic, (5 << 22) | address.phy_id)


def test_a3_chips_report_their_super_pod(dcmi_double: Control) -> None:
    a3_double(dcmi_double)
    dcmi_double.set_int("mainboard_id", -1, 0x18)
    backend = make_backend(dcmi_double)
    for address in DEFAULT_CHIPS:
        static = backend.read_static(address)
        assert static.super_pod_id.value == 7
        assert static.server_index.value == 5
        assert static.super_device_id.value == (5 << 22) | address.phy_id
        assert static.main_board_id.value == 0x18
    # Asked as the reference asks: the unit type first, then the device info.
    assert dcmi_double.call_count("dcmi_get_device_type") == len(DEFAULT_CHIPS)
    assert dcmi_double.call_count("dcmi_get_device_info") == len(DEFAULT_CHIPS)


def test_sdid_above_int32_keeps_its_unsigned_value(dcmi_double: Control) -> None:
    a3_double(dcmi_double)
    dcmi_double.set_int("sdid", 0, 0xFFC0000F)  # server index 1023: bit 31 set
    assert make_backend(dcmi_double).read_static(chip(0)).super_device_id.value == 0xFFC0000F


def test_super_pod_is_not_asked_of_other_families(dcmi_double: Control) -> None:
    dcmi_double.set_int("mainboard_id", -1, 0x30)
    backend = make_backend(dcmi_double)  # the double's default: 910B3 on board 0x22
    static = backend.read_static(chip(0))
    for field in (static.super_pod_id, static.server_index, static.super_device_id):
        assert field.status is ReadStatus.UNSUPPORTED and field.code == -8255
    assert static.main_board_id.value == 0x30  # the reference reads the main board of every family
    assert dcmi_double.call_count("dcmi_get_device_type") == 0
    assert dcmi_double.call_count("dcmi_get_device_info") == 0


def test_super_pod_failure_marks_its_three_fields_and_nothing_else(dcmi_double: Control) -> None:
    a3_double(dcmi_double)
    dcmi_double.set_rc("dcmi_get_device_info", 1, -8005)
    dcmi_double.set_int("unit_type", 2, 2)  # a CPU unit: the reference refuses to ask its super pod
    dcmi_double.set_rc("dcmi_get_device_type", 3, -8255)
    backend = make_backend(dcmi_double)
    failed = backend.read_static(chip(1))
    for field in (failed.super_pod_id, failed.server_index, failed.super_device_id):
        assert field.status is ReadStatus.ERROR and field.code == -8005
    assert failed.board_id.is_ok and failed.main_board_id.is_ok and failed.partner_card.is_ok
    for logic in (2, 3):
        static = backend.read_static(chip(logic))
        assert static.super_device_id.status is ReadStatus.UNSUPPORTED, logic
    assert dcmi_double.call_count("dcmi_get_device_info", 2) == 0
    assert dcmi_double.call_count("dcmi_get_device_info", 3) == 0
    assert backend.read_static(chip(0)).super_device_id.value == (5 << 22) | 2


def test_main_board_id_failure_is_a_field_error(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_get_mainboard_id", 0, -8255)
    dcmi_double.set_int("mainboard_id", 1, 0x19)
    backend = make_backend(dcmi_double)
    static = backend.read_static(chip(0))
    assert static.main_board_id.status is ReadStatus.UNSUPPORTED
    assert static.board_id.is_ok
    assert backend.read_static(chip(1)).main_board_id.value == 0x19


EXAMPLE_DIE_ID = "00000001-0000ABCD-00000000-00000000-00000012"  # issue 23's words [0x1, 0xABCD, 0, 0, 0x12]


def test_vdie_id_is_read_and_formatted_as_the_reference(dcmi_double: Control) -> None:
    for i, word in enumerate((0xDEADBEEF, 0xCAFE, 0xA, 0xB0B, 0x7FFFFFFF)):
        dcmi_double.set_int(f"vdie{i}", 1, word)
    backend = make_backend(dcmi_double)
    static = backend.read_static(chip(1))
    assert static.vdie_id == "DEADBEEF-0000CAFE-0000000A-00000B0B-7FFFFFFF"
    assert static.ddie_id is None  # a 910B on the v1 library: no DDIE, not even asked
    # The double's default words of phy 0 (logic 2) are the example; phy 2 differs in its last word.
    assert backend.read_static(chip(2)).vdie_id == EXAMPLE_DIE_ID
    assert backend.read_static(chip(0)).vdie_id == "00000001-0000ABCD-00000000-00000000-00000014"
    # One v1 call per read, by (card, device); never the v2 symbol.
    assert dcmi_double.call_count("dcmi_get_device_die_v2", 1) == 1
    assert dcmi_double.call_count("dcmiv2_get_device_die_id") == 0


def test_a_failed_die_read_is_none_logged_once_and_the_chip_still_reads(
    dcmi_double: Control, caplog: pytest.LogCaptureFixture
) -> None:
    dcmi_double.set_rc("dcmi_get_device_die_v2", 0, -8005)
    backend = make_backend(dcmi_double)
    with caplog.at_level("WARNING", logger="dcmi_exporter.backends.dcmi.backend"):
        first, again = backend.read_static(chip(0)), backend.read_static(chip(0))
    assert first.vdie_id is None and again.vdie_id is None
    assert first.chip_name.value == "910B3" and first.board_id.is_ok and first.main_board_id.is_ok
    warnings = [r for r in caplog.records if r.getMessage() == "die id unreadable"]
    assert len(warnings) == 1
    assert (getattr(warnings[0], "logic_id", None), getattr(warnings[0], "rc", None)) == (0, -8005)
    assert backend.read_static(chip(1)).vdie_id == "00000001-0000ABCD-00000000-00000000-00000015"
    assert dcmi_double.call_count("dcmi_get_device_die_v2", 0) == 2  # asked again: the driver may recover
    dcmi_double.set_rc("dcmi_get_device_die_v2", 0, 0)
    assert backend.read_static(chip(0)).vdie_id == "00000001-0000ABCD-00000000-00000000-00000014"


def test_an_unsupported_die_call_reads_none(dcmi_double: Control) -> None:
    """A driver that does not support the call (-8255; a missing symbol is the same NotSupported)."""
    dcmi_double.set_rc("dcmi_get_device_die_v2", -1, -8255)
    static = make_backend(dcmi_double).read_static(chip(3))
    assert static.vdie_id is None and static.chip_name.is_ok


# --------------------------------------------------------------------------------- dynamic state


def test_read_dynamic_reports_what_the_double_returns(dcmi_double: Control) -> None:
    dcmi_double.set_int("health", 3, 2)
    dcmi_double.set_codes(3, [0x80E01801, 0x8C1FA006])
    dcmi_double.set_int("network_health", 3, 6)
    dcmi_double.set_int("hbm_total", 3, 32768)
    dcmi_double.set_int("hbm_used", 3, 12345)
    dcmi_double.set_int("hbm_freq", 3, 1200)
    dcmi_double.set_int("hbm_temp", 3, 51)
    dcmi_double.set_int("hbm_bw", 3, 33)
    dcmi_double.set_int("temperature", 3, 67)
    dcmi_double.set_int("power", 3, 1234)  # 0.1 W
    dcmi_double.set_int("util_aicore", 3, 88)
    dcmi_double.set_int("util_hbm", 3, 44)
    dcmi_double.set_procs(3, [(4242, 1 << 30), (77, 5 << 20)])
    dcmi_double.set_int("boot_status", 3, 3)
    backend = make_backend(dcmi_double)

    dyn = backend.read_dynamic(chip(3))
    assert dyn.health.value == 2
    assert dyn.error_codes.value == ["80E01801", "8C1FA006"]
    assert dyn.network_health.value == 6
    assert dyn.hbm.value == Hbm(
        total_mb=32768, used_mb=12345, frequency_mhz=1200, temperature_c=51, bandwidth_util_pct=33
    )
    assert dyn.temperature_c.value == 67
    assert dyn.power_w.value == pytest.approx(123.4)
    assert dyn.utilization.value == Utilization(aicore_pct=88, hbm_pct=44)
    assert dyn.processes.value == [
        ChipProcess(pid=4242, memory_bytes=1 << 30),
        ChipProcess(pid=77, memory_bytes=5 << 20),
    ]
    assert dyn.boot_status.value == 3
    assert dyn.vnpus.value == []

    healthy = backend.read_dynamic(chip(0))  # another chip keeps its own (default) values
    assert healthy.health.value == 0 and healthy.error_codes.value == [] and healthy.processes.value == []


def test_card_drop_raises_card_dropped_only_for_that_chip(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_get_device_health", 2, -8012)
    backend = make_backend(dcmi_double)
    with pytest.raises(CardDropped) as err:
        backend.read_dynamic(chip(2))
    assert err.value.code == -8012
    assert backend.read_dynamic(chip(3)).health.value == 0
    # health is read first, so nothing else was asked of the dropped chip
    assert dcmi_double.call_count("dcmi_get_device_errorcode_v2", 2) == 0


def test_whole_chip_not_ready_is_a_card_drop(dcmi_double: Control) -> None:
    dcmi_double.set_rc("*", 1, -8012)
    backend = make_backend(dcmi_double)
    with pytest.raises(CardDropped):
        backend.read_dynamic(chip(1))


def test_not_ready_outside_the_health_call_is_a_field_error(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_get_device_temperature", 0, -8012)
    backend = make_backend(dcmi_double)
    dyn = backend.read_dynamic(chip(0))
    assert dyn.temperature_c.status is ReadStatus.ERROR and dyn.temperature_c.code == -8012
    assert dyn.health.is_ok


def test_unsupported_field_does_not_hide_the_others(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_get_device_hbm_info", 0, -8255)
    dcmi_double.set_rc("dcmi_get_device_temperature", 0, -8005)
    dcmi_double.set_int("power", 0, 777)
    dcmi_double.set_codes(0, [0x81078603])
    backend = make_backend(dcmi_double)
    dyn = backend.read_dynamic(chip(0))
    assert dyn.hbm.status is ReadStatus.UNSUPPORTED and dyn.hbm.code == -8255 and dyn.hbm.value is None
    assert dyn.temperature_c.status is ReadStatus.ERROR and dyn.temperature_c.code == -8005
    assert dyn.power_w.value == pytest.approx(77.7)
    assert dyn.error_codes.value == ["81078603"]
    assert dyn.health.is_ok and dyn.utilization.is_ok and dyn.processes.is_ok and dyn.boot_status.is_ok


def test_half_unsupported_utilization_keeps_the_other_half(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    dcmi_double.set_rc("dcmi_get_device_utilization_rate", 1, -8255)
    util = backend.read_dynamic(chip(1)).utilization
    assert util.status is ReadStatus.UNSUPPORTED and util.code == -8255


def test_error_codes_above_int32_and_the_128_limit(dcmi_double: Control) -> None:
    dcmi_double.set_codes(0, [0x80E01801, 0xFFFFFFFF, 0x8C1FA006, 0x1A, 0x7FFFFFFF])
    many = [0x80000000 + i for i in range(128)]
    dcmi_double.set_codes(1, many)
    backend = make_backend(dcmi_double)
    assert backend.read_dynamic(chip(0)).error_codes.value == ["80E01801", "FFFFFFFF", "8C1FA006", "1A", "7FFFFFFF"]
    assert backend.read_dynamic(chip(1)).error_codes.value == [f"{c:X}" for c in many]


def test_format_code() -> None:
    assert format_code(0x80E01801) == "80E01801"
    assert format_code(0x40F84E00) == "40F84E00"
    assert format_code(-2132797439) == "80E01801"  # the same uint read through a signed type
    assert format_code(0xABC) == "ABC"  # the reference does not zero-pad


# --------------------------------------------------------------------------------- missing symbols


def test_missing_symbols_are_unsupported_and_never_crash(dcmi_double_nosub: Control) -> None:
    backend = make_backend(dcmi_double_nosub)
    assert not backend.library.has("dcmi_subscribe_fault_event")
    assert not backend.library.has("dcmi_get_netdev_brother_device")
    assert backend.subscribe(lambda _: None) is False
    assert backend.discover() == DEFAULT_CHIPS
    static = backend.read_static(chip(0))
    assert static.partner_card.status is ReadStatus.UNSUPPORTED and static.partner_card.code == -8255
    assert static.chip_name.value == "910B3" and static.board_id.is_ok
    assert backend.read_dynamic(chip(0)).health.value == 0


def test_full_double_has_the_symbols_the_nosub_one_lacks(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    assert backend.library.has("dcmi_subscribe_fault_event")
    assert backend.read_static(chip(0)).partner_card.value == 1  # default brother = card ^ 1


# --------------------------------------------------------------------------------- hung calls


def test_a_hung_chip_times_out_and_does_not_block_the_others(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    dcmi_double.hang(1)  # every call for logic 1 blocks until released
    guard = CallGuard(keys=4, timeout_s=0.3)

    async def scenario() -> None:
        with pytest.raises(CallTimeout):
            await guard.call(1, lambda: backend.read_dynamic(chip(1)))
        await until(lambda: dcmi_double.hanging() >= 1, what="chip 1's call hanging in the double")
        assert guard.is_hung(1)

        # Chip 1 hangs until released: a call queued behind it would never return within the bound.
        other = await asyncio.wait_for(guard.call(0, lambda: backend.read_dynamic(chip(0))), WAIT_S)
        assert other.health.value == 0

        with pytest.raises(CallTimeout):  # fails fast while the abandoned call is out
            await guard.call(1, lambda: backend.read_dynamic(chip(1)), timeout_s=5.0)

        dcmi_double.release(1)
        await until(lambda: not guard.is_hung(1), what="chip 1's abandoned call to return")
        again = await guard.call(1, lambda: backend.read_dynamic(chip(1)))
        assert again.health.value == 0

    try:
        asyncio.run(scenario())
    finally:
        dcmi_double.release(-1)
        guard.shutdown()


def test_a_slow_chip_answers_after_its_delay(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    dcmi_double.hang(2, 50)
    started = time.monotonic()
    assert backend.boot_status(chip(2)) == 16
    assert time.monotonic() - started >= 0.045


# --------------------------------------------------------------------------------- fault events


class Collector:
    def __init__(self) -> None:
        self.events: list[RawFaultEvent | RawSwitchEvent] = []
        self.threads: list[int] = []
        self.arrived = threading.Event()

    def __call__(self, event: RawFaultEvent | RawSwitchEvent) -> None:
        self.events.append(event)
        self.threads.append(threading.get_ident())
        self.arrived.set()


def test_subscription_registers_for_all_chips_with_an_empty_filter(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    assert backend.subscribe(Collector()) is True
    subscribed, card, dev, filter_bytes = dcmi_double.subscription()
    assert subscribed and (card, dev) == (-1, -1)
    # by value: the library got a zeroed struct, not a pointer's bytes
    assert filter_bytes == bytes(len(filter_bytes))


def test_events_from_a_driver_thread_arrive_as_raw_fault_events(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    sink = Collector()
    assert backend.subscribe(sink)
    gc.collect()  # the callback thunk must survive a collection: the backend keeps it referenced

    assert dcmi_double.fire_event(3, 0x80E01801, 2, 1, 1_699_999_000, "HBM multi-bit ECC") == 0
    assert dcmi_double.fire_event(0, 0x8C1FA006, 3, 0, name="link") == 0
    assert dcmi_double.fire_event(2, 0x81078603, 1, 2) == 0
    now_ms = 1_700_000_000_500  # the backend's clock at receipt, not alarm_raised_time (see backend._on_event)
    assert sink.events == [
        RawFaultEvent(
            logic_id=3,
            code="80E01801",
            severity=2,
            assertion=Assertion.OCCUR,
            raised_at_ms=now_ms,
            name="HBM multi-bit ECC",
        ),
        RawFaultEvent(
            logic_id=0, code="8C1FA006", severity=3, assertion=Assertion.RECOVER, raised_at_ms=now_ms, name="link"
        ),
        RawFaultEvent(logic_id=2, code="81078603", severity=1, assertion=Assertion.ONCE, raised_at_ms=now_ms),
    ]
    assert threading.get_ident() not in sink.threads  # delivered on the double's own thread


def test_event_callback_never_raises_into_c(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    delivered: list[RawFaultEvent | RawSwitchEvent] = []

    def flaky(event: RawFaultEvent | RawSwitchEvent) -> None:
        delivered.append(event)
        if len(delivered) == 1:
            raise RuntimeError("sink failure")

    assert backend.subscribe(flaky)
    assert dcmi_double.fire_event(1, 0x1, 0, 1) == 0
    assert dcmi_double.fire_event(1, 0x2, 0, 1) == 0
    assert dcmi_double.fire_event(1, 0x3, 0, 9) == 0  # unknown assertion: dropped
    assert dcmi_double.fire_event(1, 0x4, 0, 1, event_type=7) == 0  # not a fault event: ignored
    assert [e.code for e in delivered if isinstance(e, RawFaultEvent)] == ["1", "2"]


def test_close_drops_late_events(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    sink = Collector()
    assert backend.subscribe(sink)
    backend.close()
    assert dcmi_double.fire_event(0, 0x80E01801, 2, 1) == 0
    assert sink.events == []


def test_failed_subscription_falls_back_to_polling(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_subscribe_fault_event", -1, -8002)
    backend = make_backend(dcmi_double)
    assert backend.subscribe(Collector()) is False


# --------------------------------------------------------------------------------- reset


def test_inband_reset_and_boot_progression(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    backend.reset(chip(2), ResetChannel.INBAND)
    assert dcmi_double.reset_log(2) == (1, "reset:inband")
    assert dcmi_double.reset_log(3) == (-1, "")  # the reset went to (card 1, dev 0) only
    assert [backend.boot_status(chip(2)) for _ in range(3)] == [2, 2, 16]


def test_inband_reset_failure_is_reset_failed(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_set_device_reset", 1, -8015)
    backend = make_backend(dcmi_double)
    with pytest.raises(ResetFailed) as err:
        backend.reset(chip(1), ResetChannel.INBAND)
    assert err.value.code == -8015


def test_outband_reset_runs_the_reference_sequence(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    assert backend.outband_supported(chip(0))
    backend.reset(chip(0), ResetChannel.OUTBAND)
    assert dcmi_double.reset_log(0) == (0, "pre_reset,reset:outband,rescan")


def test_outband_reset_needs_a_ready_channel(dcmi_double: Control) -> None:
    dcmi_double.set_int("outband_state", 3, 0)
    backend = make_backend(dcmi_double)
    assert not backend.outband_supported(chip(3))
    with pytest.raises(NotSupported):
        backend.reset(chip(3), ResetChannel.OUTBAND)
    assert dcmi_double.reset_log(3) == (-1, "")
    dcmi_double.set_rc("dcmi_get_device_outband_channel_state", 2, -8255)
    assert not backend.outband_supported(chip(2))


# --------------------------------------------------------------------------------- vNPU


def test_vnpu_create_lets_the_library_choose_and_destroy_forgets(dcmi_double: Control) -> None:
    dcmi_double.set_int("next_vdev_id", -1, 105)
    dcmi_double.set_int("next_vfg_id", 1, 3)
    backend = make_backend(dcmi_double)

    vnpu = backend.create_vnpu(chip(1), "vir05_1c_16g", None, None)
    assert vnpu == Vnpu(vdev_id=105, vfg_id=3, template="vir05_1c_16g", suffix="5c.1cpu.16g", aicore=5)
    assert dcmi_double.vdev_request(1) == (0xFFFFFFFF, 0xFFFFFFFF, "vir05_1c_16g", 1)

    explicit = backend.create_vnpu(chip(1), "vir10_3c_32g", 200, 4)
    assert (explicit.vdev_id, explicit.vfg_id, explicit.aicore) == (200, 4, 10)
    assert dcmi_double.vdev_request(1) == (200, 4, "vir10_3c_32g", 2)

    assert backend.read_dynamic(chip(1)).vnpus.value == [vnpu, explicit]
    assert backend.read_dynamic(chip(0)).vnpus.value == []

    backend.destroy_vnpu(chip(1), 105)
    assert backend.read_dynamic(chip(1)).vnpus.value == [explicit]
    assert dcmi_double.vdev_request(1)[3] == 1


def test_vnpu_failures_leave_the_registry_alone(dcmi_double: Control) -> None:
    backend = make_backend(dcmi_double)
    kept = backend.create_vnpu(chip(0), "vir06_1c_16g", None, None)
    with pytest.raises(BadParameter):
        backend.destroy_vnpu(chip(0), 999)  # the double does not know it: -8001
    with pytest.raises(BadParameter):
        backend.create_vnpu(chip(0), "vir99_bogus", None, None)  # not a template: no library call
    assert dcmi_double.call_count("dcmi_create_vdevice", 0) == 1
    dcmi_double.set_rc("dcmi_create_vdevice", 0, -8020)
    with pytest.raises(DcmiError) as err:
        backend.create_vnpu(chip(0), "vir03_1c_8g", None, None)
    assert err.value.code == -8020
    assert backend.read_dynamic(chip(0)).vnpus.value == [kept]


# --------------------------------------------------------------------------------- config file


CONFIG = """\
# two cards, one of them with three chips
chip 3 0 4 0
chip 3 1 0 1   # logic 0 sits on phy 1
chip 3 2 1 2
chip 8 0 2 3
int health 2 1
str chip_name * 910B2C
codes 4 80E01801,0xA0000001
procs 0 100:4096,200:8192
rc dcmi_get_device_network_health 1 -8255
"""


def test_config_file_applied_at_dcmi_init(
    dcmi_double: Control, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "double.conf"
    config.write_text(CONFIG)
    monkeypatch.setenv("DCMI_DOUBLE_CONFIG", str(config))
    backend = make_backend(dcmi_double)
    chips = backend.discover()
    assert [(c.card_id, c.device_id, c.logic_id, c.phy_id) for c in chips] == [
        (3, 1, 0, 1),
        (3, 2, 1, 2),
        (8, 0, 2, 3),
        (3, 0, 4, 0),
    ]
    by_logic = {c.logic_id: c for c in chips}
    assert backend.read_dynamic(by_logic[4]).error_codes.value == ["80E01801", "A0000001"]
    assert backend.read_dynamic(by_logic[2]).health.value == 1
    assert backend.read_dynamic(by_logic[1]).network_health.status is ReadStatus.UNSUPPORTED
    assert [p.pid for p in backend.read_dynamic(by_logic[0]).processes.value or []] == [100, 200]
    assert backend.read_static(by_logic[2]).chip_name.value == "910B2C"

    # rewriting the file changes the running model (checked on the next health read)
    config.write_text(CONFIG + "rc dcmi_get_device_health 4 -8012\n")
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(CardDropped):
        backend.read_dynamic(by_logic[4])


def test_config_file_errors_are_reported(dcmi_double: Control, tmp_path: Path) -> None:
    config = tmp_path / "bad.conf"
    config.write_text("chip 0 0 0 1\nint no_such_field 0 1\n")
    assert dcmi_double.load_config(config) == 2
    assert dcmi_double.load_config(tmp_path / "missing.conf") == -1


def test_out_of_process_exporter_run_is_driven_by_the_config_file(dcmi_double_path: Path, tmp_path: Path) -> None:
    config = tmp_path / "double.conf"
    config.write_text("chip 0 0 1 5\nchip 0 1 0 4\ncodes 1 80E01801\nevent 10 1 8C1FA006 3 1 scheduled fault\n")
    script = """
import json, sys, threading
from dcmi_exporter.backends.dcmi import DcmiBackend
backend = DcmiBackend(sys.argv[1])
backend.init()
got = threading.Event()
events = []
def sink(ev):
    events.append(ev)
    got.set()
subscribed = backend.subscribe(sink)
got.wait(5)
chips = backend.discover()
print(json.dumps({
    "chips": [[c.card_id, c.device_id, c.logic_id, c.phy_id] for c in chips],
    "codes": backend.read_dynamic(chips[1]).error_codes.value,
    "subscribed": subscribed,
    "events": [[e.logic_id, e.code, e.severity, e.assertion.value, e.name] for e in events],
}))
"""
    env = dict(os.environ)
    env["DCMI_DOUBLE_CONFIG"] = str(config)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "libs" / "common" / "src"), str(REPO / "services" / "dcmi-exporter" / "src")]
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(dcmi_double_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result == {
        "chips": [[0, 1, 0, 4], [0, 0, 1, 5]],
        "codes": ["80E01801"],
        "subscribed": True,
        "events": [[1, "8C1FA006", 3, "occur", "scheduled fault"]],
    }


# --------------------------------------------------------------------------------- v2 (the 950)

# The default layout as a v2 library reports it: logic ids and phy ids, no card, no device.
A5_CHIPS = [ChipAddress(card_id=-1, device_id=-1, logic_id=a.logic_id, phy_id=a.phy_id) for a in DEFAULT_CHIPS]
A5_BOARD = 0x50  # neither an A3 nor an Atlas 350 board


def a5_double(double: Control) -> None:
    """A 950 node: dcmi_init fails, so only the v2 calls answer; every chip an Ascend950PR."""
    double.set_rc("dcmi_init", -1, -8255)
    double.set_str("chip_name", -1, "Ascend950PR")
    double.set_int("board_id", -1, A5_BOARD)


def a5_chip(logic: int) -> ChipAddress:
    return A5_CHIPS[logic]


def test_v2_is_spoken_when_dcmi_init_fails(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    backend = make_backend(dcmi_double)
    assert backend.generation.name == "dcmiv2"
    assert backend.discover() == A5_CHIPS
    assert dcmi_double.call_count("dcmiv2_init") == 1
    assert dcmi_double.call_count("dcmiv2_get_device_list") == 1
    assert dcmi_double.call_count("dcmiv2_get_chip_phy_id_by_dev_id") == len(A5_CHIPS)
    assert dcmi_double.call_count("dcmi_get_card_list") == 0


def test_v1_is_kept_when_dcmi_init_starts(dcmi_double: Control) -> None:
    dcmi_double.set_str("chip_name", -1, "Ascend950PR")  # the name does not choose the generation: init does
    backend = make_backend(dcmi_double)
    assert backend.generation.name == "dcmi"
    assert backend.discover() == DEFAULT_CHIPS
    assert dcmi_double.call_count("dcmiv2_init") == 0


def test_init_fails_when_neither_generation_starts(dcmi_double: Control) -> None:
    dcmi_double.set_rc("dcmi_init", -1, -8005)
    dcmi_double.set_rc("dcmiv2_init", -1, -8255)
    backend = DcmiBackend(dcmi_double.path)
    with pytest.raises(DcmiError) as err:
        backend.init()
    assert err.value.code == -8005 and "dcmiv2_init" in str(err.value)


def test_v2_discover_follows_an_uneven_layout(dcmi_double: Control) -> None:
    layout = [(4, 0, 5, 1), (4, 1, 0, 7), (9, 0, 3, 0), (2, 0, 1, 2)]
    dcmi_double.set_layout(layout)
    a5_double(dcmi_double)
    backend = make_backend(dcmi_double)
    assert backend.discover() == [
        ChipAddress(card_id=-1, device_id=-1, logic_id=lg, phy_id=p) for lg, p in ((0, 7), (1, 2), (3, 0), (5, 1))
    ]


def test_v2_discover_raises_the_typed_error_of_a_failing_call(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_rc("dcmiv2_get_device_list", -1, -8005)
    with pytest.raises(DcmiError) as err:
        make_backend(dcmi_double).discover()
    assert err.value.code == -8005


def test_v2_version(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_str("version", -1, "25.5.0")
    backend = make_backend(dcmi_double)
    assert backend.version().value == "25.5.0"
    assert dcmi_double.call_count("dcmiv2_get_dcmi_version") == 1


def a5_super_pod(double: Control) -> None:
    """Super pod 5, server 1, rack 3 of a 2D pod of 8192, SDIDs as the A3 encodes them."""
    double.set_int("super_pod_id", -1, 5)
    double.set_int("server_id", -1, 1)
    double.set_int("chassis_id", -1, 3)
    double.set_int("super_pod_type", -1, 2)
    double.set_int("scale_type", -1, 8192)
    for logic, address in enumerate(A5_CHIPS):
        double.set_int("sdid", logic, (1 << 22) | address.phy_id)


def test_v2_read_static_reports_what_the_double_returns(dcmi_double: Control, numa_root: Path) -> None:
    a5_double(dcmi_double)
    a5_super_pod(dcmi_double)
    dcmi_double.set_str("chip_type", 1, "AscendX")
    dcmi_double.set_str("chip_ver", 1, "V2")
    dcmi_double.set_int("aicore", 1, 25)
    dcmi_double.set_int("board_id", 1, 0x1B)
    dcmi_double.set_int("mainboard_id", 1, 0x68)
    dcmi_double.set_str("affinity", 1, "16-31")
    backend = make_backend(dcmi_double, numa_root)

    static = backend.read_static(a5_chip(1))
    assert (static.chip_type.value, static.chip_name.value, static.chip_version.value) == (
        "AscendX",
        "Ascend950PR",
        "V2",
    )
    assert (static.aicore.value, static.board_id.value, static.main_board_id.value) == (25, 0x1B, 0x68)
    assert static.numa_node.value == 1
    assert (static.super_pod_id.value, static.server_index.value, static.super_device_id.value) == (5, 1, 1 << 22 | 3)
    assert (static.rack_id.value, static.super_pod_type.value, static.scale_type.value) == (3, 2, 8192)
    # The v2 library has no product type, partner card or device IP call (the reference: "not supported").
    for unsupported in (static.product_type, static.partner_card, static.device_ip):
        assert unsupported.status is ReadStatus.UNSUPPORTED and unsupported.code == -8255
    assert backend.read_static(a5_chip(0)).board_id.value == A5_BOARD  # another chip keeps its own values
    # Asked through the v2 calls, by logic id, as the reference's GetSuperPodInfo asks.
    assert dcmi_double.call_count("dcmiv2_get_device_type", 1) == 1
    assert dcmi_double.call_count("dcmiv2_get_device_info", 1) == 1
    assert dcmi_double.call_count("dcmiv2_get_device_chip_info", 1) == 1
    assert dcmi_double.call_count("dcmi_get_device_info") == 0
    assert dcmi_double.call_count("dcmi_get_device_chip_info_v2") == 0


def test_v2_reads_the_vdie_and_the_ddie_of_a_950(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_int("ddie1", 3, 0xABCD)
    dcmi_double.set_int("ddie4", 3, 0xFFFFFFFF)
    backend = make_backend(dcmi_double)
    static = backend.read_static(a5_chip(3))  # phy 1
    assert static.vdie_id == "00000001-0000ABCD-00000000-00000000-00000013"
    assert static.ddie_id == "00000002-0000ABCD-00000000-00000000-FFFFFFFF"
    assert backend.read_static(a5_chip(2)).ddie_id == "00000002-0000DD1E-00000000-00000000-00000012"
    # Asked through the v2 call by logic id, once per die type; never the v1 symbol.
    assert dcmi_double.call_count("dcmiv2_get_device_die_id", 3) == 2
    assert dcmi_double.call_count("dcmi_get_device_die_v2") == 0


def test_v2_failed_die_reads_are_none_and_the_chip_still_reads(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_rc("dcmiv2_get_device_die_id", 0, -8005)  # the double fails every die type of chip 0
    backend = make_backend(dcmi_double)
    static = backend.read_static(a5_chip(0))
    assert static.vdie_id is None and static.ddie_id is None
    assert static.chip_name.value == "Ascend950PR" and static.super_pod_id.is_ok
    assert backend.read_static(a5_chip(1)).ddie_id == "00000002-0000DD1E-00000000-00000000-00000015"


def test_v2_other_families_are_not_asked_their_ddie(dcmi_double: Control) -> None:
    """The reference's plugin asks the DDIE of the 950 alone; a v2 chip that is no 950 reads none."""
    dcmi_double.set_rc("dcmi_init", -1, -8255)  # a v2 library, chips left 910B3
    static = make_backend(dcmi_double).read_static(a5_chip(0))
    assert static.vdie_id == "00000001-0000ABCD-00000000-00000000-00000014" and static.ddie_id is None
    assert dcmi_double.call_count("dcmiv2_get_device_die_id", 0) == 1


def test_v2_super_pod_uint32_values_stay_unsigned(dcmi_double: Control) -> None:
    """A server outside any pod answers 0xFFFFFFFF for pod, rack and size; the exporter passes it on."""
    a5_double(dcmi_double)
    for field in ("super_pod_id", "chassis_id", "scale_type"):
        dcmi_double.set_int(field, -1, 0xFFFFFFFF)
    static = make_backend(dcmi_double).read_static(a5_chip(0))
    assert (static.super_pod_id.value, static.rack_id.value, static.scale_type.value) == (0xFFFFFFFF,) * 3
    assert static.super_pod_type.value == 0


def test_v2_super_pod_failure_marks_its_six_fields_and_nothing_else(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_rc("dcmiv2_get_device_info", 2, -8005)
    static = make_backend(dcmi_double).read_static(a5_chip(2))
    pod = (static.super_pod_id, static.server_index, static.super_device_id)
    for field in (*pod, static.rack_id, static.super_pod_type, static.scale_type):
        assert field.status is ReadStatus.ERROR and field.code == -8005
    assert static.board_id.is_ok and static.main_board_id.is_ok and static.chip_name.is_ok


def test_a3_chips_report_no_rack_type_or_size(dcmi_double: Control) -> None:
    """The reference reads chassis id, super-pod type and size of the 950 alone."""
    a3_double(dcmi_double)
    dcmi_double.set_int("chassis_id", -1, 3)
    dcmi_double.set_int("super_pod_type", -1, 1)
    static = make_backend(dcmi_double).read_static(chip(0))
    assert static.super_pod_id.value == 7
    for field in (static.rack_id, static.super_pod_type, static.scale_type):
        assert field.status is ReadStatus.UNSUPPORTED


def test_v2_read_dynamic_reports_what_the_double_returns(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_int("health", 3, 2)
    dcmi_double.set_codes(3, [0x80E01801, 0xFFFFFFFF])
    dcmi_double.set_int("network_health", 3, 6)
    dcmi_double.set_int("hbm_total", 3, 131072)
    dcmi_double.set_int("hbm_used", 3, 4321)
    dcmi_double.set_int("temperature", 3, 61)
    dcmi_double.set_int("power", 3, 4567)
    dcmi_double.set_int("util_aicore", 3, 77)
    dcmi_double.set_int("util_hbm", 3, 33)
    dcmi_double.set_procs(3, [(4242, 1 << 30)])
    dcmi_double.set_int("boot_status", 3, 3)
    backend = make_backend(dcmi_double)

    dyn = backend.read_dynamic(a5_chip(3))
    assert dyn.health.value == 2
    assert dyn.error_codes.value == ["80E01801", "FFFFFFFF"]
    assert dyn.network_health.value == 6
    assert dyn.hbm.value is not None and (dyn.hbm.value.total_mb, dyn.hbm.value.used_mb) == (131072, 4321)
    assert dyn.temperature_c.value == 61
    assert dyn.power_w.value == pytest.approx(456.7)
    assert dyn.utilization.value == Utilization(aicore_pct=77, hbm_pct=33)
    assert dyn.processes.value == [ChipProcess(pid=4242, memory_bytes=1 << 30)]
    assert dyn.boot_status.value == 3
    assert backend.read_dynamic(a5_chip(0)).health.value == 0
    v1_calls = ("dcmi_get_device_health", "dcmi_get_device_errorcode_v2", "dcmi_get_device_resource_info")
    assert [dcmi_double.call_count(name) for name in v1_calls] == [0, 0, 0]
    assert dcmi_double.call_count("dcmiv2_get_device_proc_mem_info", 3) == 1


def test_v2_card_drop_raises_card_dropped_only_for_that_chip(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    dcmi_double.set_rc("dcmiv2_get_device_health", 2, -8012)
    backend = make_backend(dcmi_double)
    with pytest.raises(CardDropped):
        backend.read_dynamic(a5_chip(2))
    assert backend.read_dynamic(a5_chip(3)).health.value == 0
    assert dcmi_double.call_count("dcmiv2_get_device_error_code_list", 2) == 0


def test_v2_subscription_registers_for_every_chip_and_delivers_events(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    backend = make_backend(dcmi_double)
    sink = Collector()
    assert backend.subscribe(sink) is True
    subscribed, dev, _, filter_bytes = dcmi_double.subscription()
    assert subscribed and dev == -1 and filter_bytes == bytes(len(filter_bytes))
    assert dcmi_double.call_count("dcmiv2_subscribe_fault_event") == 1
    assert dcmi_double.call_count("dcmi_subscribe_fault_event") == 0
    assert dcmi_double.fire_event(2, 0x80E01801, 2, 1, name="HBM") == 0
    assert sink.events == [
        RawFaultEvent(
            logic_id=2,
            code="80E01801",
            severity=2,
            assertion=Assertion.OCCUR,
            raised_at_ms=1_700_000_000_500,
            name="HBM",
        )
    ]


def test_v2_without_a_subscription_polls(dcmi_double_nosub: Control) -> None:
    a5_double(dcmi_double_nosub)
    backend = make_backend(dcmi_double_nosub)
    assert not backend.library.has("dcmiv2_subscribe_fault_event")
    assert backend.subscribe(Collector()) is False
    assert backend.read_dynamic(a5_chip(0)).health.value == 0


def test_v2_inband_reset_goes_to_the_chip_by_its_logic_id(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    backend = make_backend(dcmi_double)
    backend.reset(a5_chip(2), ResetChannel.INBAND)
    assert dcmi_double.reset_log(2) == (1, "reset:inband")
    assert dcmi_double.reset_log(3) == (-1, "")
    assert dcmi_double.call_count("dcmiv2_reset_device", 2) == 1
    assert [backend.boot_status(a5_chip(2)) for _ in range(3)] == [2, 2, 16]


def test_v2_outband_reset_runs_the_reference_sequence(dcmi_double: Control) -> None:
    a5_double(dcmi_double)
    backend = make_backend(dcmi_double)
    assert backend.outband_supported(a5_chip(0))
    backend.reset(a5_chip(0), ResetChannel.OUTBAND)
    assert dcmi_double.reset_log(0) == (0, "pre_reset,reset:outband,rescan")
    assert dcmi_double.call_count("dcmiv2_pre_reset_device", 0) == 1
    assert dcmi_double.call_count("dcmiv2_rescan_device", 0) == 1


def test_v2_has_no_vnpus(dcmi_double: Control) -> None:
    """DeviceManagerV2.CreateVirtualDevice / DestroyVirtualDevice: not supported in dcmiv2."""
    a5_double(dcmi_double)
    backend = make_backend(dcmi_double)
    with pytest.raises(NotSupported):
        backend.create_vnpu(a5_chip(0), "vir05_1c_16g", None, None)
    with pytest.raises(NotSupported):
        backend.destroy_vnpu(a5_chip(0), 100)
    assert dcmi_double.call_count("dcmi_create_vdevice") == 0
    assert backend.read_dynamic(a5_chip(0)).vnpus.value == []


def test_v2_config_file_makes_a_v2_only_library(
    dcmi_double: Control, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "a5.conf"
    config.write_text(
        "rc dcmi_init * -8255\nchip 0 0 1 5\nchip 0 1 0 4\nstr chip_name * Ascend950PR\ncodes 1 80E01801\n"
    )
    monkeypatch.setenv("DCMI_DOUBLE_CONFIG", str(config))
    backend = make_backend(dcmi_double)
    assert backend.generation.name == "dcmiv2"
    chips = backend.discover()
    assert chips == [ChipAddress(-1, -1, 0, 4), ChipAddress(-1, -1, 1, 5)]
    assert backend.read_dynamic(chips[1]).error_codes.value == ["80E01801"]
    # rewriting the file changes the running model (checked on the next v2 health read)
    config.write_text(config.read_text() + "rc dcmiv2_get_device_health 0 -8012\n")
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(CardDropped):
        backend.read_dynamic(chips[0])
