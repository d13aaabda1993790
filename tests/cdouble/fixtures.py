"""pytest fixtures and a typed control handle for the C double of libdcmi.so.

tests/cdouble is not a package; test modules load this file by path (see `load_fixtures` in
services/dcmi-exporter/tests/test_dcmi_backend.py) and re-export the fixtures they use.

The double's state lives in the loaded .so. ctypes/dlopen hand out one handle per path, so the
DoubleControl of a test and the DcmiBackend under test share that state; the function-scoped
fixtures reset it before and after every test (the reset also releases hung calls, so that no
abandoned thread outlives the test).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import pytest

HERE = Path(__file__).resolve().parent


from tests.cdouble import build  # noqa: E402

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_uint_p = ctypes.POINTER(ctypes.c_uint)

_CONTROL: dict[str, tuple[object, list[object]]] = {
    "dcmi_double_reset": (None, []),
    "dcmi_double_set_layout": (ctypes.c_int, [ctypes.c_int, _c_int_p, _c_int_p, _c_int_p, _c_int_p]),
    "dcmi_double_set_rc": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]),
    "dcmi_double_hang": (ctypes.c_int, [ctypes.c_int, ctypes.c_int]),
    "dcmi_double_release": (ctypes.c_int, [ctypes.c_int]),
    "dcmi_double_hanging": (ctypes.c_int, []),
    "dcmi_double_set_codes": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, _c_uint_p]),
    "dcmi_double_set_int": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_longlong]),
    "dcmi_double_set_str": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]),
    "dcmi_double_set_procs": (
        ctypes.c_int,
        [ctypes.c_int, ctypes.c_int, _c_int_p, ctypes.POINTER(ctypes.c_ulong)],
    ),
    "dcmi_double_fire_event": (
        ctypes.c_int,
        [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_ulonglong,
            ctypes.c_char_p,
        ],
    ),
    "dcmi_double_subscription": (ctypes.c_int, [_c_int_p, _c_int_p, ctypes.c_char_p]),
    "dcmi_double_call_count": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int]),
    "dcmi_double_reset_log": (ctypes.c_int, [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
    "dcmi_double_vdev_request": (
        ctypes.c_int,
        [ctypes.c_int, _c_uint_p, _c_uint_p, ctypes.c_char_p, ctypes.c_int],
    ),
    "dcmi_double_load_config": (ctypes.c_int, [ctypes.c_char_p]),
    "dcmi_double_set_urma": (ctypes.c_int, [ctypes.c_int, ctypes.c_uint, ctypes.c_int, ctypes.c_char_p]),
    "dcmi_double_die_policies": (ctypes.c_int, [_c_uint_p, ctypes.c_int]),
    "dcmi_double_set_vdev": (ctypes.c_int, [ctypes.c_int, ctypes.c_uint, ctypes.c_char_p, ctypes.c_longlong]),
}

# (card, dev, logic, phy) of the double's default layout: logic ids differ from phy ids.
DEFAULT_LAYOUT: tuple[tuple[int, int, int, int], ...] = ((0, 0, 0, 2), (0, 1, 1, 3), (1, 0, 2, 0), (1, 1, 3, 1))


class DoubleControl:
    """Typed access to the dcmi_double_* control functions of one built double."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lib = ctypes.CDLL(str(path))
        for name, (restype, argtypes) in _CONTROL.items():
            fn = getattr(self._lib, name)
            fn.restype = restype
            fn.argtypes = argtypes

    def _ok(self, rc: int, what: str) -> None:
        if rc != 0:
            raise ValueError(f"libdcmi double rejected {what} (rc {rc})")

    def reset(self) -> None:
        self._lib.dcmi_double_reset()

    def set_layout(self, chips: Sequence[tuple[int, int, int, int]]) -> None:
        """chips: (card, dev, logic, phy) in card/dev order."""
        n = len(chips)
        cols = [(ctypes.c_int * n)(*(chip[i] for chip in chips)) for i in range(4)]
        self._ok(self._lib.dcmi_double_set_layout(n, *cols), f"layout {chips}")

    def set_rc(self, function: str, logic: int, rc: int) -> None:
        self._ok(self._lib.dcmi_double_set_rc(function.encode(), logic, rc), f"rc override {function}")

    def hang(self, logic: int, ms: int = -1) -> None:
        self._ok(self._lib.dcmi_double_hang(logic, ms), f"hang of {logic}")

    def release(self, logic: int = -1) -> None:
        self._lib.dcmi_double_release(logic)

    def hanging(self) -> int:
        return int(self._lib.dcmi_double_hanging())

    def set_codes(self, logic: int, codes: Sequence[int]) -> None:
        arr = (ctypes.c_uint * max(len(codes), 1))(*codes)
        self._ok(self._lib.dcmi_double_set_codes(logic, len(codes), arr), "codes")

    def set_int(self, field: str, logic: int, value: int) -> None:
        self._ok(self._lib.dcmi_double_set_int(field.encode(), logic, value), f"int {field}")

    def set_str(self, field: str, logic: int, value: str) -> None:
        self._ok(self._lib.dcmi_double_set_str(field.encode(), logic, value.encode()), f"str {field}")

    def set_procs(self, logic: int, procs: Sequence[tuple[int, int]]) -> None:
        n = len(procs)
        pids = (ctypes.c_int * max(n, 1))(*(p for p, _ in procs))
        mem = (ctypes.c_ulong * max(n, 1))(*(m for _, m in procs))
        self._ok(self._lib.dcmi_double_set_procs(logic, n, pids, mem), "procs")

    def set_urma(self, logic: int, index: int, eids: Sequence[str]) -> None:
        """One urma device of the chip: its EIDs as 32 hex digits each (the count grows to index + 1)."""
        raw = b"".join(bytes.fromhex(eid) for eid in eids)
        self._ok(self._lib.dcmi_double_set_urma(logic, index, len(eids), raw), f"urma {logic}/{index}")

    def set_vdev(self, logic: int, vdev_id: int, field: str, value: int) -> None:
        """A vNPU's reading: `aic` (the resource query's AI cores), `aicore_util`, `mem_total`,
        `mem_free` (the activity query's)."""
        self._ok(self._lib.dcmi_double_set_vdev(logic, vdev_id, field.encode(), value), f"vdev {vdev_id} {field}")

    def fire_event(
        self,
        logic: int,
        event_id: int,
        severity: int,
        assertion: int,
        raised_time: int = 0,
        name: str = "",
        event_type: int = 0,
    ) -> int:
        """Deliver one event through the subscribed callback, from a new C thread; waits for it.
        0 delivered, -1 nobody subscribed."""
        return int(
            self._lib.dcmi_double_fire_event(
                event_type, logic, event_id, severity, assertion, raised_time, name.encode()
            )
        )

    def subscription(self) -> tuple[bool, int, int, bytes]:
        """(subscribed, card, dev, raw bytes of the filter the library received by value)."""
        card, dev = ctypes.c_int(0), ctypes.c_int(0)
        buf = ctypes.create_string_buffer(256)
        subscribed = self._lib.dcmi_double_subscription(ctypes.byref(card), ctypes.byref(dev), buf)
        return bool(subscribed), card.value, dev.value, buf.raw

    def call_count(self, function: str, logic: int = -1) -> int:
        n = int(self._lib.dcmi_double_call_count(function.encode(), logic))
        if n < 0:
            raise ValueError(f"unknown function {function}")
        return n

    def reset_log(self, logic: int) -> tuple[int, str]:
        """(last reset channel or -1, comma-joined reset steps)."""
        buf = ctypes.create_string_buffer(256)
        channel = int(self._lib.dcmi_double_reset_log(logic, buf, len(buf)))
        return channel, buf.value.decode()

    def vdev_request(self, logic: int) -> tuple[int, int, str, int]:
        """(vdev_id, vfg_id, template) of the last create request, and the chip's vNPU count."""
        vdev, vfg = ctypes.c_uint(0), ctypes.c_uint(0)
        buf = ctypes.create_string_buffer(64)
        count = int(self._lib.dcmi_double_vdev_request(logic, ctypes.byref(vdev), ctypes.byref(vfg), buf, len(buf)))
        return vdev.value, vfg.value, buf.value.decode(), count

    def load_config(self, path: Path) -> int:
        return int(self._lib.dcmi_double_load_config(str(path).encode()))

    def die_policies(self) -> list[int]:
        """The policies dcmi_set_multi_die_policy was called with since the last reset, in order."""
        out = (ctypes.c_uint * 16)()
        n = int(self._lib.dcmi_double_die_policies(out, len(out)))
        return list(out[: min(n, len(out))])


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def cdouble_build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if build.find_compiler() is None:
        pytest.skip("no C compiler: the libdcmi double cannot be built")
    path: Path = tmp_path_factory.mktemp("cdouble")
    return path


@pytest.fixture(scope="session")
def dcmi_double_path(cdouble_build_dir: Path) -> Path:
    path: Path = build.build_double(cdouble_build_dir, "full")
    return path


@pytest.fixture(scope="session")
def dcmi_double_nosub_path(cdouble_build_dir: Path) -> Path:
    path: Path = build.build_double(cdouble_build_dir, "nosub")
    return path


@pytest.fixture(scope="session")
def dcmi_layout_binary(cdouble_build_dir: Path) -> Path:
    path: Path = build.build_layout(cdouble_build_dir)
    return path


@pytest.fixture
def dcmi_double(dcmi_double_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DoubleControl]:
    """The full double, reset to its default model (2 cards x 2 chips, logic 0..3 -> phy 2,3,0,1)."""
    monkeypatch.delenv("DCMI_DOUBLE_CONFIG", raising=False)
    control = DoubleControl(dcmi_double_path)
    control.reset()
    yield control
    control.reset()


@pytest.fixture
def dcmi_double_nosub(dcmi_double_nosub_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DoubleControl]:
    """The double built without dcmi_subscribe_fault_event / dcmi_get_netdev_brother_device."""
    monkeypatch.delenv("DCMI_DOUBLE_CONFIG", raising=False)
    control = DoubleControl(dcmi_double_nosub_path)
    control.reset()
    yield control
    control.reset()


@pytest.fixture
def numa_root(tmp_path: Path) -> Path:
    """A fake /sys/devices/system/node: node0 holds CPUs 0-15, node1 CPUs 16-31."""
    root = tmp_path / "node"
    for node, cpus in ((0, "0-15"), (1, "16-31")):
        (root / f"node{node}").mkdir(parents=True)
        (root / f"node{node}" / "cpulist").write_text(cpus + "\n")
    (root / "possible").write_text("0-1\n")  # sysfs has non-node entries too
    return root


# ------------------------------------------------------------------- the switch library's double

_EVENT_ARGS: list[object] = [*([ctypes.c_uint] * 8), ctypes.c_ulong]
_LQ_CONTROL: dict[str, tuple[object, list[object]]] = {
    "lq_double_reset": (None, []),
    "lq_double_add_fault": (ctypes.c_int, _EVENT_ARGS),
    "lq_double_clear_faults": (None, []),
    "lq_double_set_count": (None, [ctypes.c_int]),
    "lq_double_fire": (ctypes.c_int, _EVENT_ARGS),
    "lq_double_set_rc": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int]),
    "lq_double_hang": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int]),
    "lq_double_release": (None, []),
    "lq_double_hanging": (ctypes.c_int, []),
    "lq_double_call_count": (ctypes.c_int, [ctypes.c_char_p]),
    "lq_double_subscription": (ctypes.c_int, [ctypes.c_void_p]),
    "lq_double_layout": (ctypes.c_int, [ctypes.c_char_p]),
}
NO_FAULT_ID = 0xFFFFFFFF


class SwitchFault(NamedTuple):
    """One LqDcmiEvent as the double takes it (library.h field order)."""

    event_type: int
    sub_type: int = NO_FAULT_ID
    peer_port_device: int = 0
    peer_port_id: int = 0
    switch_chip_id: int = 0
    switch_port_id: int = 0
    severity: int = 1
    assertion: int = 1
    alarm_ms: int = 0

    def config_line(self, command: str = "fault") -> str:
        sub = "na" if self.sub_type == NO_FAULT_ID else str(self.sub_type)
        return (
            f"{command} {self.event_type:#x} {sub} {self.peer_port_device} {self.peer_port_id} {self.switch_chip_id}"
            f" {self.switch_port_id} {self.severity} {self.assertion} {self.alarm_ms}\n"
        )


class LingquControl:
    """Typed access to the lq_double_* control functions of the built liblingqu double."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lib = ctypes.CDLL(str(path))
        for name, (restype, argtypes) in _LQ_CONTROL.items():
            fn = getattr(self._lib, name)
            fn.restype = restype
            fn.argtypes = argtypes

    def reset(self) -> None:
        self._lib.lq_double_reset()

    def add_fault(self, fault: SwitchFault) -> None:
        if self._lib.lq_double_add_fault(*fault) != 0:
            raise ValueError("the liblingqu double's fault list is full")

    def clear_faults(self) -> None:
        self._lib.lq_double_clear_faults()

    def set_count(self, count: int) -> None:
        self._lib.lq_double_set_count(count)

    def fire(self, fault: SwitchFault) -> int:
        """Deliver one event through the subscribed callback from a C thread; 0 delivered, -1 nobody subscribed."""
        return int(self._lib.lq_double_fire(*fault))

    def set_rc(self, function: str, rc: int) -> None:
        if self._lib.lq_double_set_rc(function.encode(), rc) != 0:
            raise ValueError(f"unknown function {function}")

    def hang(self, function: str, ms: int = -1) -> None:
        if self._lib.lq_double_hang(function.encode(), ms) != 0:
            raise ValueError(f"unknown function {function}")

    def release(self) -> None:
        self._lib.lq_double_release()

    def hanging(self) -> int:
        return int(self._lib.lq_double_hanging())

    def call_count(self, function: str) -> int:
        n = int(self._lib.lq_double_call_count(function.encode()))
        if n < 0:
            raise ValueError(f"unknown function {function}")
        return n

    def subscribed(self) -> bool:
        return bool(self._lib.lq_double_subscription(None))

    def layout(self, what: str) -> int:
        return int(self._lib.lq_double_layout(what.encode()))


@pytest.fixture(scope="session")
def lingqu_double_path(cdouble_build_dir: Path) -> Path:
    path: Path = build.build_lingqu(cdouble_build_dir)
    return path


@pytest.fixture
def lingqu_double(lingqu_double_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LingquControl]:
    """The switch library's double, empty: no fault, no subscription (a hung call is released after)."""
    monkeypatch.delenv("LQ_DOUBLE_CONFIG", raising=False)
    control = LingquControl(lingqu_double_path)
    control.reset()
    yield control
    control.reset()
