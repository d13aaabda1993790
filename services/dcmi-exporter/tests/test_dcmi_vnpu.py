"""A vNPU's activity through DcmiBackend against the C double of libdcmi.so: the VDEV_MNG resource
query (its AI cores) and activity query (AI-core %, memory), as npu-exporter's DcVGetDeviceInfo /
DcGetVDevActivityInfo read them, with every value set apart from the double's defaults so that a
test passes only if it travelled through the C call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import pytest
from ascend_common.chips import ChipAddress
from dcmi_exporter.backends.base import VnpuActivity
from dcmi_exporter.backends.dcmi import DcmiBackend

# The fixtures live beside the C double; the repo root is on sys.path (pytest `pythonpath`).
import tests.cdouble.fixtures as _fx

cdouble_build_dir = _fx.cdouble_build_dir
dcmi_double_path = _fx.dcmi_double_path
dcmi_double = _fx.dcmi_double

Control: TypeAlias = Any  # tests/cdouble/fixtures.py:DoubleControl, loaded by path
CHIP = ChipAddress(card_id=0, device_id=1, logic_id=1, phy_id=3)  # the double's logic 1
LOGGER = "dcmi_exporter.backends.dcmi.backend"


def backend_with_vnpu(double: Control, template: str = "vir02", vdev_id: int | None = None) -> tuple[DcmiBackend, int]:
    double.set_str("chip_name", CHIP.logic_id, "310P3")
    backend = DcmiBackend(double.path)
    backend.init()
    return backend, backend.create_vnpu(CHIP, template, vdev_id, None).vdev_id


def device_info_calls(double: Control, read: Callable[[], object]) -> int:
    """dcmi_get_device_info calls on the chip during `read`."""
    before = double.call_count("dcmi_get_device_info", CHIP.logic_id)
    read()
    return int(double.call_count("dcmi_get_device_info", CHIP.logic_id) - before)


@pytest.fixture
def others(dcmi_double: Control) -> int:
    """The dcmi_get_device_info calls of a telemetry read of a chip without vNPUs (HCCS and SIO
    counters go through the same call)."""
    backend = DcmiBackend(dcmi_double.path)
    backend.init()
    return device_info_calls(dcmi_double, lambda: backend.read_telemetry(CHIP))


def set_activity(double: Control, vdev_id: int, util: int, total: int, free: int) -> None:
    for field, value in (("aicore_util", util), ("mem_total", total), ("mem_free", free)):
        double.set_vdev(CHIP.logic_id, vdev_id, field, value)


def test_each_vnpu_reads_its_ai_cores_from_the_resource_query_and_its_use_from_the_activity_query(
    dcmi_double: Control,
    others: int,
) -> None:
    backend, vdev = backend_with_vnpu(dcmi_double)
    other = backend.create_vnpu(CHIP, "vir04", None, None).vdev_id
    dcmi_double.set_vdev(CHIP.logic_id, vdev, "aic", 3)  # not the template's 2: read from the query
    set_activity(dcmi_double, vdev, util=37, total=4_194_304, free=1_048_576)
    set_activity(dcmi_double, other, util=5, total=8_388_608, free=8_388_000)
    samples = []
    # Each vNPU: one resource query, one activity query.
    assert device_info_calls(dcmi_double, lambda: samples.append(backend.read_telemetry(CHIP))) == others + 4
    assert samples[0].vnpus == (
        VnpuActivity(vdev_id=vdev, aicore=3.0, aicore_pct=37, total_memory=4_194_304, used_memory=3_145_728),
        VnpuActivity(vdev_id=other, aicore=4.0, aicore_pct=5, total_memory=8_388_608, used_memory=608),
    )


def test_a_chip_without_vnpus_asks_no_vnpu_query(
    dcmi_double: Control,
    others: int,
) -> None:
    backend = DcmiBackend(dcmi_double.path)
    backend.init()
    assert device_info_calls(dcmi_double, lambda: backend.read_telemetry(CHIP)) == others
    assert backend.read_telemetry(CHIP).vnpus == ()


def test_a_vdev_id_outside_100_to_1123_is_never_queried(
    dcmi_double: Control,
    others: int,
) -> None:
    """The reference's DcGetVDevActivityInfo refuses such an id (IsValidVDevID) before the call."""
    backend, vdev = backend_with_vnpu(dcmi_double, vdev_id=5)
    assert vdev == 5
    assert device_info_calls(dcmi_double, lambda: backend.read_telemetry(CHIP)) == others
    assert backend.read_telemetry(CHIP).vnpus == ()


def test_a_failed_query_drops_that_vnpu_is_logged_once_and_logged_again_when_it_recovers(
    dcmi_double: Control, caplog: pytest.LogCaptureFixture
) -> None:
    backend, vdev = backend_with_vnpu(dcmi_double)
    set_activity(dcmi_double, vdev, util=10, total=100, free=40)
    dcmi_double.set_rc("dcmi_get_device_info", CHIP.logic_id, -8005)
    with caplog.at_level("INFO", logger=LOGGER):
        first, again = backend.read_telemetry(CHIP), backend.read_telemetry(CHIP)
        assert first.vnpus == () and again.vnpus == ()
        assert first.serial_number is not None  # the chip's other telemetry still reads
        warnings = [
            r for r in caplog.records if r.levelname == "WARNING" and "vNPU activity unreadable" in r.getMessage()
        ]
        assert len(warnings) == 1
        assert (getattr(warnings[0], "logic_id", None), getattr(warnings[0], "vdev_id", None)) == (1, vdev)
        assert "-8005" in getattr(warnings[0], "error", "")
        dcmi_double.set_rc("dcmi_get_device_info", CHIP.logic_id, 0)
        back = backend.read_telemetry(CHIP)
    assert back.vnpus == (VnpuActivity(vdev, 2.0, 10, 100, 60),)
    assert [r.getMessage() for r in caplog.records if r.levelname == "INFO"] == ["vNPU activity readable again"]


def test_free_memory_above_total_is_a_failed_read_not_a_wrapped_number(
    dcmi_double: Control, caplog: pytest.LogCaptureFixture
) -> None:
    """The reference subtracts the two unsigned values and serves what wraps around."""
    backend, vdev = backend_with_vnpu(dcmi_double)
    set_activity(dcmi_double, vdev, util=10, total=100, free=101)
    with caplog.at_level("WARNING", logger=LOGGER):
        assert backend.read_telemetry(CHIP).vnpus == ()
    assert any("free memory 101 above total 100" in getattr(r, "error", "") for r in caplog.records)


def test_a_destroyed_vnpu_is_no_longer_queried(
    dcmi_double: Control,
    others: int,
) -> None:
    backend, vdev = backend_with_vnpu(dcmi_double)
    backend.destroy_vnpu(CHIP, vdev)
    assert device_info_calls(dcmi_double, lambda: backend.read_telemetry(CHIP)) == others
    assert backend.read_telemetry(CHIP).vnpus == ()


def test_the_double_refuses_a_vdev_id_the_chip_does_not_hold(dcmi_double: Control) -> None:
    """What the binding relies on from the library: another chip's vNPU is not described here."""
    _, vdev = backend_with_vnpu(dcmi_double)
    with pytest.raises(ValueError, match="rejected vdev"):
        dcmi_double.set_vdev(0, vdev, "aic", 1)  # logic 0 holds no such vNPU
    with pytest.raises(ValueError, match="rejected vdev"):
        dcmi_double.set_vdev(CHIP.logic_id, vdev, "no_such_field", 1)
