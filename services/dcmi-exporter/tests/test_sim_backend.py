"""The simulated backend: layouts, fault injection, card drop, hangs, reset, vNPUs, switch faults."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from ascend_common.chips import ChipAddress, ChipFamily, ChipTopology, detect_family
from ascend_common.clock import ManualClock, SystemClock
from ascend_common.products import (
    HCCL_TOPO_DIR,
    ProductType,
    card_type,
    hccl_topo_file,
    is_pod_scene,
    product_type,
)
from ascend_common.reset_groups import reset_groups
from ascend_common.schemas.exporter import (
    BOOT_STATUS_READY,
    MAX_BURST,
    Assertion,
    ResetChannel,
)
from ascend_common.superpod import main_board_id, super_pod
from ascend_common.vnpu import ALLOWED_TEMPLATES, TEMPLATES
from dcmi_exporter.backends.base import Backend, RawFaultEvent, RawSwitchEvent
from dcmi_exporter.backends.errors import (
    RC_INTERNAL,
    RC_NOT_READY,
    RC_NOT_SUPPORTED,
    RC_RESET_FAILED,
    BadParameter,
    Busy,
    CardDropped,
    DcmiError,
    NoSuchDevice,
    NotSupported,
    ResetFailed,
)
from dcmi_exporter.backends.sim import PROFILES, RESET_STAGES, SimBackend

pytestmark = pytest.mark.timeout(60)

JOIN_S = 5.0  # upper bound for any thread the tests start
BLOCKED_S = 0.3  # how long a hung call must stay blocked to count as blocked
GIB = 1024**3

Event = RawFaultEvent | RawSwitchEvent
Factory = Callable[..., SimBackend]


class Recorder:
    """A thread-safe sink that remembers every event."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = []

    def __call__(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def faults(self) -> list[RawFaultEvent]:
        return [e for e in self.events if isinstance(e, RawFaultEvent)]


@pytest.fixture
def make() -> Iterator[Factory]:
    """Build backends; release every hang at teardown so no test thread stays blocked."""
    made: list[SimBackend] = []

    def factory(profile: str = "910b-8", **kwargs: Any) -> SimBackend:
        backend = SimBackend(profile, **kwargs)
        made.append(backend)
        return backend

    yield factory
    for backend in made:
        backend.close()


def chip(backend: SimBackend, logic_id: int) -> ChipAddress:
    return next(a for a in backend.discover() if a.logic_id == logic_id)


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# ----- layouts ---------------------------------------------------------------------------

LAYOUTS = [
    # profile, cards, chips per card, family, logic != phy required, aicore, hbm MB, outband
    ("910b-8", 8, 1, ChipFamily.ASCEND910B, True, 20, 65536, True),
    ("910b-infer-4", 4, 1, ChipFamily.ASCEND910B, False, 20, 32768, False),
    ("910a-8", 8, 1, ChipFamily.ASCEND910, False, 32, 32768, False),
    ("a3-16", 8, 2, ChipFamily.ASCEND910A3, True, 24, 65536, True),
    ("310p-duo-4", 2, 2, ChipFamily.ASCEND310P, False, 8, 24576, False),
    ("310p-4", 4, 1, ChipFamily.ASCEND310P, False, 8, 24576, False),
    # 950: the v2 library reports no card, so "cards" are the chips, each alone.
    ("a5-superpod-8", 8, 1, ChipFamily.ASCEND950, True, 25, 147456, True),
    ("a5-8", 8, 1, ChipFamily.ASCEND950, True, 25, 131072, True),
    ("a5-atlas350-4", 4, 1, ChipFamily.ASCEND950, False, 25, 131072, False),
    ("a5-atlas350-4p", 4, 1, ChipFamily.ASCEND950, True, 25, 131072, False),
]
A5_PROFILES = ("a5-superpod-8", "a5-8", "a5-atlas350-4", "a5-atlas350-4p")


def test_sim_every_profile_has_a_layout_row() -> None:
    assert sorted(PROFILES) == sorted(row[0] for row in LAYOUTS)


@pytest.mark.parametrize(("profile", "cards", "per_card", "family", "permuted", "aicore", "hbm", "outband"), LAYOUTS)
def test_sim_profile_layout(
    make: Factory,
    profile: str,
    cards: int,
    per_card: int,
    family: ChipFamily,
    permuted: bool,
    aicore: int,
    hbm: int,
    outband: bool,
) -> None:
    backend = make(profile)
    backend.init()
    chips = backend.discover()
    assert backend.kind == "sim"
    assert backend.profile == profile
    assert len(chips) == cards * per_card
    assert sorted(c.logic_id for c in chips) == list(range(cards * per_card))
    assert sorted(c.phy_id for c in chips) == list(range(cards * per_card))
    if family is ChipFamily.ASCEND950:  # dcmiv2: a chip is its logic id, with no card or device
        assert {(c.card_id, c.device_id) for c in chips} == {(-1, -1)}
    else:
        by_card: dict[int, list[ChipAddress]] = {}
        for c in chips:
            by_card.setdefault(c.card_id, []).append(c)
        assert len(by_card) == cards
        assert all(sorted(c.device_id for c in group) == list(range(per_card)) for group in by_card.values())
    if permuted:
        assert all(c.logic_id != c.phy_id for c in chips)
    for c in chips:
        static = backend.read_static(c)
        assert static.chip_name.value is not None
        assert static.board_id.value is not None
        assert detect_family(static.chip_name.value, static.board_id.value) is family
        assert static.aicore.value == aicore
        assert static.chip_type.value == "Ascend"
        assert static.chip_version.value == "V1"
        assert static.numa_node.value == (0 if c.phy_id < len(chips) // 2 else 1)
        if family in (ChipFamily.ASCEND310P, ChipFamily.ASCEND950):  # no RoCE port / no v2 IP call
            assert static.device_ip.code == RC_NOT_SUPPORTED
        else:
            assert static.device_ip.value == f"192.168.100.{c.phy_id + 1}"
        dynamic = backend.read_dynamic(c)
        assert dynamic.hbm.value is not None
        assert dynamic.hbm.value.total_mb == hbm
        assert backend.outband_supported(c) is outband
    assert backend.version().is_ok


def test_sim_product_types_and_partner_cards(make: Factory) -> None:
    assert make("910b-8").read_static(chip(make("910b-8"), 0)).product_type.value == "Atlas 800T A2"
    infer = make("910b-infer-4")
    assert infer.read_static(chip(infer, 0)).product_type.value == "Atlas 300I A2"
    duo = make("310p-duo-4")
    assert duo.read_static(chip(duo, 0)).product_type.value == "Atlas 300I Duo"
    pro = make("310p-4")
    assert pro.read_static(chip(pro, 0)).product_type.value == "Atlas 300I Pro"
    a3 = make("a3-16")
    for c in a3.discover():
        assert a3.read_static(c).partner_card.value == c.card_id ^ 1
    b = make("910b-8")
    assert b.read_static(chip(b, 0)).partner_card.code == RC_NOT_SUPPORTED


@pytest.mark.parametrize("profile", A5_PROFILES)
def test_sim_a5_has_no_product_type_or_partner_card(make: Factory, profile: str) -> None:
    """The v2 library has neither call: "not supported", as the reference's DeviceManagerV2 answers."""
    backend = make(profile)
    s = backend.read_static(chip(backend, 0))
    assert s.product_type.code == RC_NOT_SUPPORTED and s.partner_card.code == RC_NOT_SUPPORTED


def test_sim_a3_chips_report_their_super_pod(make: Factory) -> None:
    a3 = make("a3-16")
    sdids = set()
    for c in a3.discover():
        s = a3.read_static(c)
        assert (s.super_pod_id.value, s.server_index.value) == (3, 1)
        assert s.super_device_id.value == (1 << 22) | c.phy_id  # server index above bit 22, device below 16
        assert s.main_board_id.value == 0x18  # an Atlas 900 A3 SuperPoD main board
        sdids.add(s.super_device_id.value)
    assert len(sdids) == 16


def test_sim_a3_chips_report_no_rack_type_or_size(make: Factory) -> None:
    a3 = make("a3-16")
    s = a3.read_static(chip(a3, 0))
    for reading in (s.rack_id, s.super_pod_type, s.scale_type):
        assert reading.code == RC_NOT_SUPPORTED


NONE = 0xFFFFFFFF  # the library's uint32 "none"


@pytest.mark.parametrize(
    ("profile", "pod", "index", "rack", "kind", "size", "board", "main_board"),
    [
        ("a5-superpod-8", 5, 1, 3, 2, 8192, 0x50, 0x03),  # a 2D pod's server
        ("a5-8", NONE, NONE, NONE, 0, NONE, 0x50, 0x25),  # a server in no super pod, an Atlas 850 UBoE board
        ("a5-atlas350-4", NONE, NONE, NONE, 5, NONE, 0x1B, 0x68),
        ("a5-atlas350-4p", NONE, NONE, NONE, 6, NONE, 0x1C, 0x6C),
    ],
)
def test_sim_a5_chips_report_their_super_pod(
    make: Factory, profile: str, pod: int, index: int, rack: int, kind: int, size: int, board: int, main_board: int
) -> None:
    backend = make(profile)
    sdids = set()
    for c in backend.discover():
        s = backend.read_static(c)
        assert (s.super_pod_id.value, s.server_index.value) == (pod, index)
        assert (s.rack_id.value, s.super_pod_type.value, s.scale_type.value) == (rack, kind, size)
        assert (s.board_id.value, s.main_board_id.value) == (board, main_board)
        server = 0 if index == NONE else index
        assert s.super_device_id.value == (server << 22) | c.phy_id  # the A3 encoding, reused
        sdids.add(s.super_device_id.value)
    assert len(sdids) == len(backend.discover())


@pytest.mark.parametrize(
    ("profile", "card", "product", "topo_file"),
    [
        ("a5-superpod-8", None, ProductType.POD_2D, "atlas_950_2.json"),
        ("a5-8", None, ProductType.SERVER, "atlas_850_1.json"),
        ("a5-atlas350-4", "300I-Atlas350", ProductType.CARD_1P, "atlas_350_1.json"),
        ("a5-atlas350-4p", "300I-Atlas350-4p", ProductType.CARD_4P, "atlas_350_3.json"),
    ],
)
def test_sim_a5_profiles_are_the_products_they_model(
    make: Factory, profile: str, card: str | None, product: ProductType, topo_file: str
) -> None:
    """What a consumer derives from the static data (ascend_common.products) is the product named."""
    backend = make(profile)
    statics = [backend.read_static(c) for c in backend.discover()]
    node = super_pod(statics)
    node_card = card_type(statics[0].board_id.value, main_board_id(statics))
    assert node_card == card
    assert product_type(node_card, node.super_pod_type) == product
    assert hccl_topo_file(product_type(node_card, node.super_pod_type)) == f"{HCCL_TOPO_DIR}/{topo_file}"
    assert is_pod_scene(node.super_pod_type) is (profile == "a5-superpod-8")


@pytest.mark.parametrize("profile", sorted(set(PROFILES) - {"a3-16", *A5_PROFILES}))
def test_sim_other_families_have_no_super_pod(make: Factory, profile: str) -> None:
    backend = make(profile)
    s = backend.read_static(chip(backend, 0))
    for reading in (s.super_pod_id, s.server_index, s.super_device_id, s.main_board_id):
        assert reading.code == RC_NOT_SUPPORTED
    for reading in (s.rack_id, s.super_pod_type, s.scale_type):
        assert reading.code == RC_NOT_SUPPORTED


def test_sim_profile_super_pod_only_on_a3_and_950() -> None:
    with pytest.raises(ValueError, match="only an A3 or 950 profile"):
        replace(PROFILES["910b-8"], super_pod_id=1, server_index=0)
    with pytest.raises(ValueError, match="only an A3 or 950 profile"):
        replace(PROFILES["a3-16"], server_index=None)
    with pytest.raises(ValueError, match="only a 950 super pod"):
        replace(PROFILES["a3-16"], rack_id=1, super_pod_type=1, scale_type=8)
    with pytest.raises(ValueError, match="only a 950 super pod"):
        replace(PROFILES["a5-superpod-8"], rack_id=None)
    with pytest.raises(ValueError, match="no product type"):
        replace(PROFILES["a5-8"], product_type="Atlas 850")


@pytest.mark.parametrize(
    ("profile", "groups"),
    [
        ("910a-8", [(0, 1, 2, 3), (4, 5, 6, 7)]),  # two HCCS rings of 4 by phy id
        ("910b-8", [tuple(range(8))]),  # HCCS board: one domain
        ("910b-infer-4", [(0,), (1,), (2,), (3,)]),  # 300I A2 board without HCCS: each chip alone
        ("a3-16", [tuple(range(i, i + 4)) for i in range(0, 16, 4)]),  # card + partner card
        ("310p-duo-4", [(0, 1), (2, 3)]),  # both chips of a Duo card
        ("310p-4", [(0,), (1,), (2,), (3,)]),
        ("a5-superpod-8", [(i,) for i in range(8)]),  # Ascend910A5RingsNum: one chip at a time
        ("a5-atlas350-4p", [(i,) for i in range(4)]),
    ],
)
def test_sim_static_data_yields_the_reference_reset_groups(
    make: Factory, profile: str, groups: list[tuple[int, ...]]
) -> None:
    backend = make(profile)
    topo = []
    for c in backend.discover():
        s = backend.read_static(c)
        assert s.chip_name.value is not None
        topo.append(
            ChipTopology(
                logic_id=c.logic_id,
                phy_id=c.phy_id,
                card_id=c.card_id,
                family=detect_family(s.chip_name.value, s.board_id.value),
                board_id=s.board_id.value,
                product_type=s.product_type.value,
                partner_card=s.partner_card.value,
            )
        )
    assert reset_groups(topo) == groups


def test_sim_backend_satisfies_the_protocol(make: Factory) -> None:
    backend: Backend = make("910b-8")
    assert backend.kind == "sim"


def test_sim_unknown_profile_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown simulator profile"):
        SimBackend("910c-99")


def test_sim_unknown_chip_address_is_no_such_device(make: Factory) -> None:
    backend = make("910b-8")
    bogus = ChipAddress(card_id=0, device_id=0, logic_id=0, phy_id=0)  # logic 0 is phy 4 here
    with pytest.raises(NoSuchDevice):
        backend.read_dynamic(bogus)
    with pytest.raises(NoSuchDevice):
        backend.read_static(ChipAddress(card_id=9, device_id=0, logic_id=9, phy_id=9))


# ----- telemetry -------------------------------------------------------------------------


def test_sim_telemetry_is_deterministic_per_seed(make: Factory) -> None:
    a = make("910b-8", clock=ManualClock(), seed=7)
    b = make("910b-8", clock=ManualClock(), seed=7)
    c = make("910b-8", clock=ManualClock(), seed=8)
    reads_a = [a.read_dynamic(x) for x in a.discover()]
    assert reads_a == [b.read_dynamic(x) for x in b.discover()]
    assert reads_a != [c.read_dynamic(x) for x in c.discover()]


def test_sim_idle_chip_reads(make: Factory) -> None:
    backend = make("910b-8", clock=ManualClock())
    d = backend.read_dynamic(chip(backend, 0))
    assert d.health.value == 0
    assert d.error_codes.value == []
    assert d.network_health.value == 0
    assert d.boot_status.value == BOOT_STATUS_READY
    assert d.utilization.value is not None
    assert d.utilization.value.aicore_pct == 0
    assert d.hbm.value is not None
    assert 100 <= d.hbm.value.used_mb < 1000
    assert d.processes.value == []
    assert d.vnpus.value == []


@pytest.mark.parametrize(("profile", "lo", "hi"), [("910b-8", 80.0, 350.0), ("310p-4", 18.0, 70.0)])
def test_sim_telemetry_follows_load_and_stays_in_range(make: Factory, profile: str, lo: float, hi: float) -> None:
    clock = ManualClock()
    backend = make(profile, clock=clock, seed=3)
    c = chip(backend, 1)
    idle = backend.read_dynamic(c)
    backend.set_processes(1, [(100, 8 * GIB), (101, 4 * GIB)])
    busy = backend.read_dynamic(c)
    assert busy.utilization.value is not None
    assert idle.utilization.value is not None
    assert busy.utilization.value.aicore_pct is not None
    assert busy.utilization.value.aicore_pct > 50
    assert busy.hbm.value is not None
    assert idle.hbm.value is not None
    assert busy.hbm.value.used_mb == idle.hbm.value.used_mb + 12 * 1024
    assert busy.power_w.value is not None
    assert idle.power_w.value is not None
    assert busy.power_w.value > idle.power_w.value
    assert [p.pid for p in busy.processes.value or []] == [100, 101]
    temps = set()
    for _ in range(200):
        clock.advance(7.0)
        d = backend.read_dynamic(c)
        assert d.temperature_c.value is not None
        assert 35 <= d.temperature_c.value <= 75
        assert d.power_w.value is not None
        assert lo <= d.power_w.value <= hi
        temps.add(d.temperature_c.value)
    assert len(temps) > 1  # it drifts


# ----- fault injection -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "codes_after", "health_after"),
    [
        ([("0x80e01801", "occur", 2)], ["80E01801"], 2),
        ([("80E01801", "occur", 2), ("80e01801", "recover", 2)], [], 0),
        ([("8C1FA006", "once", 3)], [], 0),
        ([("80E01801", "occur", 1), ("8C1FA006", "occur", 3)], ["80E01801", "8C1FA006"], 3),
        ([("110000002", "occur", 0)], ["110000002"], 0),  # 9 digits; warning leaves health 0
        ([("081078603", "occur", 1)], ["81078603"], 1),  # leading zeros dropped, as the uint prints
    ],
)
def test_sim_inject_fault_table(
    make: Factory, steps: list[tuple[str, str, int]], codes_after: list[str], health_after: int
) -> None:
    backend = make("910b-8")
    sink = Recorder()
    assert backend.subscribe(sink) is True
    for code, assertion, severity in steps:
        backend.inject_fault(3, code, assertion, severity=severity)
    d = backend.read_dynamic(chip(backend, 3))
    assert d.error_codes.value == codes_after
    assert d.health.value == health_after
    events = sink.faults()
    assert [(e.logic_id, e.assertion.value, e.severity) for e in events] == [(3, a, s) for _, a, s in steps]
    assert all(e.code == e.code.upper() and not e.code.startswith("0X") for e in events)
    assert all(e.raised_at_ms > 0 for e in events)
    other = backend.read_dynamic(chip(backend, 4))
    assert other.error_codes.value == []


def test_sim_sink_gets_the_event_on_the_callers_thread(make: Factory) -> None:
    backend = make("910b-8")
    threads: list[str] = []
    backend.subscribe(lambda e: threads.append(threading.current_thread().name))
    backend.inject_fault(0, "80E01801", Assertion.OCCUR)
    assert threads == [threading.current_thread().name]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"code": "xyz"}, ValueError),
        ({"code": ""}, ValueError),
        ({"code": "1234567890"}, ValueError),  # 10 digits
        ({"code": "0"}, ValueError),
        ({"severity": 4}, ValueError),
        ({"severity": -1}, ValueError),
        ({"assertion": "boom"}, ValueError),
        ({"logic_id": 8}, KeyError),
        ({"logic_id": -1}, KeyError),
    ],
)
def test_sim_inject_fault_rejects_bad_arguments(make: Factory, kwargs: dict[str, Any], error: type[Exception]) -> None:
    backend = make("910b-8")
    sink = Recorder()
    backend.subscribe(sink)
    args: dict[str, Any] = {"logic_id": 0, "code": "80E01801", "assertion": "occur", "severity": 2} | kwargs
    with pytest.raises(error):
        backend.inject_fault(**args)
    assert sink.events == []
    assert backend.read_dynamic(chip(backend, 0)).error_codes.value == []


def test_sim_without_subscription_only_polling_sees_faults(make: Factory) -> None:
    backend = make("910b-8", subscription=False)
    sink = Recorder()
    assert backend.subscribe(sink) is False
    backend.set_sink(sink)
    backend.inject_fault(0, "80E01801", "occur")
    assert sink.events == []
    assert backend.read_dynamic(chip(backend, 0)).error_codes.value == ["80E01801"]


def test_sim_broken_sink_does_not_break_injection(make: Factory) -> None:
    backend = make("910b-8")

    def broken(event: Event) -> None:
        raise RuntimeError("consumer bug")

    backend.subscribe(broken)
    backend.inject_fault(0, "80E01801", "occur")
    assert backend.read_dynamic(chip(backend, 0)).error_codes.value == ["80E01801"]
    backend.set_sink(None)
    backend.inject_fault(0, "80E01801", "recover")  # detached: nothing raises, nothing delivered


def test_sim_persistent_code_is_listed_once(make: Factory) -> None:
    backend = make("910b-8")
    backend.inject_fault(0, "80E01801", "occur")
    backend.inject_fault(0, "80E01801", "occur", persistent=True)
    assert backend.read_dynamic(chip(backend, 0)).error_codes.value == ["80E01801"]


# ----- burst -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "mode", "active_after"),
    [(1, "flap", True), (4, "flap", False), (5, "flap", True), (3, "once", False), (MAX_BURST, "flap", False)],
)
def test_sim_burst(make: Factory, count: int, mode: str, active_after: bool) -> None:
    backend = make("910b-8")
    sink = Recorder()
    backend.subscribe(sink)
    assert backend.burst(2, "80e01801", count, mode=mode, severity=1) == count
    events = sink.faults()
    assert len(events) == count
    if mode == "flap":
        expected = [Assertion.OCCUR if i % 2 == 0 else Assertion.RECOVER for i in range(count)]
    else:
        expected = [Assertion.ONCE] * count
    assert [e.assertion for e in events] == expected
    assert {(e.code, e.severity, e.logic_id) for e in events} == {("80E01801", 1, 2)}
    codes = backend.read_dynamic(chip(backend, 2)).error_codes.value
    assert codes == (["80E01801"] if active_after else [])


@pytest.mark.parametrize(
    ("count", "mode", "match"),
    [(0, "flap", "count"), (MAX_BURST + 1, "flap", "count"), (2, "storm", "mode"), (-1, "once", "count")],
)
def test_sim_burst_rejects_bad_arguments(make: Factory, count: int, mode: str, match: str) -> None:
    backend = make("910b-8")
    sink = Recorder()
    backend.subscribe(sink)
    with pytest.raises(ValueError, match=match):
        backend.burst(0, "80E01801", count, mode=mode)
    assert sink.events == []


def test_sim_concurrent_injection_keeps_every_event_and_per_thread_order(make: Factory) -> None:
    backend = make("a3-16")
    sink = Recorder()
    backend.subscribe(sink)
    per_thread = 200
    stop_reading = threading.Event()

    def inject(logic: int) -> None:
        for i in range(per_thread):
            backend.inject_fault(logic, f"{0x80000000 + i:X}", "once")

    def read() -> None:
        while not stop_reading.is_set():
            for c in backend.discover():
                backend.read_dynamic(c)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    workers = [threading.Thread(target=inject, args=(logic,), daemon=True) for logic in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(JOIN_S * 4)
    stop_reading.set()
    reader.join(JOIN_S)
    assert not reader.is_alive()
    assert not any(w.is_alive() for w in workers)
    events = sink.faults()
    assert len(events) == 8 * per_thread
    for logic in range(8):
        mine = [int(e.code, 16) - 0x80000000 for e in events if e.logic_id == logic]
        assert mine == list(range(per_thread))


# ----- card drop -------------------------------------------------------------------------


@pytest.mark.parametrize(("profile", "card", "dropped_logic"), [("a3-16", 3, {6, 7}), ("310p-duo-4", 1, {2, 3})])
def test_sim_card_drop_hits_both_chips_of_the_card_only(
    make: Factory, profile: str, card: int, dropped_logic: set[int]
) -> None:
    backend = make(profile)
    backend.drop_card(card)
    calls: list[Callable[[ChipAddress], object]] = [
        backend.read_dynamic,
        backend.read_static,
        backend.boot_status,
        backend.outband_supported,
        lambda c: backend.reset(c, ResetChannel.INBAND),
    ]
    for c in backend.discover():
        for call in calls:
            if c.logic_id in dropped_logic:
                with pytest.raises(CardDropped) as info:
                    call(c)
                assert info.value.code == RC_NOT_READY
            else:
                call(c)
    assert {c.logic_id for c in backend.discover()} >= dropped_logic  # still listed
    backend.drop_card(card, dropped=False)
    for logic in dropped_logic:
        assert backend.read_dynamic(chip(backend, logic)).health.value == 0


def test_sim_drop_unknown_card_is_a_key_error(make: Factory) -> None:
    with pytest.raises(KeyError):
        make("310p-duo-4").drop_card(2)


def test_sim_a5_chips_belong_to_no_card_to_drop(make: Factory) -> None:
    """The v2 library knows no card: a card drop cannot be simulated on a 950 profile."""
    backend = make("a5-superpod-8")
    assert backend.card_of(3) == -1
    with pytest.raises(KeyError):
        backend.drop_card(-1)
    with pytest.raises(KeyError):
        backend.drop_card(0)


# ----- network ---------------------------------------------------------------------------


def test_sim_network_down_and_up(make: Factory) -> None:
    backend = make("910b-8")
    sink = Recorder()
    backend.subscribe(sink)
    c = chip(backend, 5)
    backend.set_network(5, healthy=False)
    backend.set_network(5, healthy=False)  # no change: no second event
    d = backend.read_dynamic(c)
    assert d.network_health.value == 1
    assert d.error_codes.value == ["81078603"]
    backend.set_network(5, healthy=True)
    assert backend.read_dynamic(c).network_health.value == 0
    assert backend.read_dynamic(c).error_codes.value == []
    assert [(e.code, e.assertion) for e in sink.faults()] == [
        ("81078603", Assertion.OCCUR),
        ("81078603", Assertion.RECOVER),
    ]


def test_sim_310p_has_no_network(make: Factory) -> None:
    backend = make("310p-4")
    assert backend.read_dynamic(chip(backend, 0)).network_health.code == RC_NOT_SUPPORTED
    with pytest.raises(ValueError, match="no chip network"):
        backend.set_network(0, healthy=False)


# ----- hang ------------------------------------------------------------------------------


def test_sim_hang_blocks_only_that_chip_until_released(make: Factory) -> None:
    backend = make("910b-8")
    backend.hang(0, None)
    assert backend.is_hung(0)
    hung, out = in_thread(lambda: backend.read_dynamic(chip(backend, 0)))
    hung.join(BLOCKED_S)
    assert hung.is_alive(), "the call for the hung chip returned"
    # Other chips answer, and the control surface (same chip included) is not blocked.
    free, free_out = in_thread(lambda: backend.read_dynamic(chip(backend, 1)))
    free.join(JOIN_S)
    assert not free.is_alive()
    assert "value" in free_out
    ctl, ctl_out = in_thread(lambda: backend.inject_fault(0, "80E01801", "occur"))
    ctl.join(JOIN_S)
    assert not ctl.is_alive()
    assert "value" in ctl_out
    backend.release(0)
    hung.join(JOIN_S)
    assert not hung.is_alive()
    assert "value" in out
    assert not backend.is_hung(0)


def test_sim_hang_ends_after_its_sim_seconds_with_a_manual_clock(make: Factory) -> None:
    clock = ManualClock()
    backend = make("910b-8", clock=clock)
    backend.hang(2, 10.0)
    hung, out = in_thread(lambda: backend.boot_status(chip(backend, 2)))
    hung.join(BLOCKED_S)
    assert hung.is_alive()
    clock.advance(9.0)
    hung.join(BLOCKED_S)
    assert hung.is_alive()
    clock.advance(1.0)
    hung.join(JOIN_S)
    assert not hung.is_alive()
    assert out.get("value") == BOOT_STATUS_READY


def test_sim_hang_duration_is_divided_by_the_time_scale(make: Factory) -> None:
    backend = make("910b-8", clock=SystemClock(time_scale=100.0))
    backend.hang(2, 10.0)  # 0.1 real seconds
    hung, out = in_thread(lambda: backend.read_static(chip(backend, 2)))
    hung.join(JOIN_S)
    assert not hung.is_alive()
    assert "value" in out


def test_sim_release_all_and_close_free_every_hung_call(make: Factory) -> None:
    backend = make("910b-8")
    for logic in (0, 1):
        backend.hang(logic, None)
    threads = [in_thread(partial(backend.read_dynamic, chip(backend, logic)))[0] for logic in (0, 1)]
    threads[0].join(BLOCKED_S)
    assert all(t.is_alive() for t in threads)
    backend.close()
    for t in threads:
        t.join(JOIN_S)
        assert not t.is_alive()


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("inf"), float("nan")])
def test_sim_hang_rejects_bad_durations(make: Factory, seconds: float) -> None:
    with pytest.raises(ValueError, match="hang duration"):
        make("910b-8").hang(0, seconds)


# ----- processes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("procs", "match"),
    [
        ([(0, 1)], "invalid pid"),
        ([(1, -1)], "invalid memory"),
        ([(1, 1), (1, 2)], "duplicate pid"),
        ([(i + 1, 0) for i in range(33)], "at most 32"),
    ],
)
def test_sim_set_processes_rejects_bad_lists(make: Factory, procs: list[tuple[int, int]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make("910b-8").set_processes(0, procs)


# ----- reset -----------------------------------------------------------------------------


def test_sim_reset_is_refused_while_processes_run(make: Factory) -> None:
    backend = make("910b-8")
    backend.set_processes(4, [(1234, GIB)])
    with pytest.raises(Busy):
        backend.reset(chip(backend, 4), ResetChannel.INBAND)
    assert backend.boot_status(chip(backend, 4)) == BOOT_STATUS_READY
    backend.set_processes(4, [])
    backend.reset(chip(backend, 4), ResetChannel.INBAND)
    assert backend.boot_status(chip(backend, 4)) == 0


@pytest.mark.parametrize("time_scale", [1.0, 10.0])
def test_sim_reset_boot_status_progression(make: Factory, time_scale: float) -> None:
    clock = ManualClock(time_scale=time_scale)
    backend = make("910b-8", clock=clock)
    c = chip(backend, 1)
    backend.reset(c, ResetChannel.INBAND)
    seen = []
    for _ in range(40):
        seen.append(backend.boot_status(c))
        clock.advance(0.1 / time_scale)
    assert backend.read_dynamic(c).boot_status.value == BOOT_STATUS_READY
    assert seen[0] == 0
    assert seen[-1] == BOOT_STATUS_READY
    assert seen == sorted(seen)  # never goes back
    assert set(seen) == {status for _, status in RESET_STAGES}
    assert seen.index(BOOT_STATUS_READY) == pytest.approx(30, abs=1)  # ~3 s of sim time


def test_sim_reset_clears_codes_but_not_persistent_or_live_link_faults(make: Factory) -> None:
    backend = make("910b-8", clock=ManualClock())
    sink = Recorder()
    backend.subscribe(sink)
    backend.inject_fault(0, "8C1FA006", "occur")
    backend.inject_fault(0, "80E18402", "occur", severity=3, persistent=True)
    backend.set_network(0, healthy=False)
    before = len(sink.events)
    backend.reset(chip(backend, 0), ResetChannel.INBAND)
    recovered = sink.faults()[before:]
    assert [(e.code, e.assertion) for e in recovered] == [("8C1FA006", Assertion.RECOVER)]
    d = backend.read_dynamic(chip(backend, 0))
    assert d.error_codes.value == ["80E18402", "81078603"]
    assert d.health.value == 3


def test_sim_outband_reset_only_where_supported(make: Factory) -> None:
    b910 = make("910b-8")
    b910.reset(chip(b910, 0), ResetChannel.OUTBAND)
    p310 = make("310p-4")
    with pytest.raises(NotSupported):
        p310.reset(chip(p310, 0), ResetChannel.OUTBAND)


def test_sim_fail_next_reset_error_is_one_shot(make: Factory) -> None:
    backend = make("910b-8", clock=ManualClock())
    c = chip(backend, 6)
    backend.inject_fault(6, "8C1FA006", "occur")
    backend.fail_next_reset(6, mode="error")
    with pytest.raises(ResetFailed) as info:
        backend.reset(c, ResetChannel.INBAND)
    assert info.value.code == RC_RESET_FAILED
    assert backend.read_dynamic(c).error_codes.value == ["8C1FA006"]  # nothing happened
    assert backend.boot_status(c) == BOOT_STATUS_READY
    backend.reset(c, ResetChannel.INBAND)  # disarmed
    assert backend.read_dynamic(c).error_codes.value == []


def test_sim_fail_next_reset_with_another_code(make: Factory) -> None:
    backend = make("910b-8")
    backend.fail_next_reset(0, mode="error", code=RC_INTERNAL)
    with pytest.raises(DcmiError) as info:
        backend.reset(chip(backend, 0), ResetChannel.INBAND)
    assert info.value.code == RC_INTERNAL


def test_sim_fail_next_reset_stuck_never_reaches_ready(make: Factory) -> None:
    clock = ManualClock()
    backend = make("910b-8", clock=clock)
    c = chip(backend, 6)
    backend.inject_fault(6, "8C1FA006", "occur")
    backend.fail_next_reset(6, mode="stuck")
    backend.reset(c, ResetChannel.INBAND)
    for _ in range(10):
        clock.advance(60.0)
        assert backend.boot_status(c) != BOOT_STATUS_READY
    assert backend.read_dynamic(c).error_codes.value == ["8C1FA006"]
    backend.reset(c, ResetChannel.INBAND)  # a second reset gets it out
    clock.advance(5.0)
    assert backend.boot_status(c) == BOOT_STATUS_READY


@pytest.mark.parametrize(
    ("mode", "code", "match"),
    [("explode", -8015, "failure mode"), ("error", 0, "error code"), ("error", 5, "error code")],
)
def test_sim_fail_next_reset_rejects_bad_arguments(make: Factory, mode: str, code: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make("910b-8").fail_next_reset(0, mode=mode, code=code)


# ----- vNPU ------------------------------------------------------------------------------

VNPU_FAMILIES = {
    "910b-8": ChipFamily.ASCEND910B,
    "910a-8": ChipFamily.ASCEND910,
    "a3-16": ChipFamily.ASCEND910A3,
    "310p-4": ChipFamily.ASCEND310P,
}


@pytest.mark.parametrize(("profile", "template"), [(p, t) for p, fam in VNPU_FAMILIES.items() for t in TEMPLATES])
def test_sim_vnpu_templates_per_family(make: Factory, profile: str, template: str) -> None:
    backend = make(profile)
    c = chip(backend, 0)
    if template in ALLOWED_TEMPLATES[VNPU_FAMILIES[profile]]:
        v = backend.create_vnpu(c, template, None, None)
        assert (v.template, v.suffix, v.aicore) == (template, TEMPLATES[template].suffix, TEMPLATES[template].aicore)
        assert backend.read_dynamic(c).vnpus.value == [v]
    else:
        with pytest.raises(BadParameter):
            backend.create_vnpu(c, template, None, None)
        assert backend.read_dynamic(c).vnpus.value == []


@pytest.mark.parametrize("profile", A5_PROFILES)
def test_sim_a5_has_no_vnpus(make: Factory, profile: str) -> None:
    """DeviceManagerV2: creating or destroying a vNPU is not supported in dcmiv2."""
    backend = make(profile)
    c = chip(backend, 0)
    with pytest.raises(NotSupported):
        backend.create_vnpu(c, "vir05_1c_16g", None, None)
    with pytest.raises(NotSupported):
        backend.destroy_vnpu(c, 100)
    assert backend.read_dynamic(c).vnpus.value == []


def test_sim_vnpu_unknown_template_is_bad_parameter(make: Factory) -> None:
    backend = make("910b-8")
    with pytest.raises(BadParameter):
        backend.create_vnpu(chip(backend, 0), "vir99", None, None)


def test_sim_vnpu_ids_budget_duplicates_and_destroy(make: Factory) -> None:
    backend = make("910b-8")  # 20 AI cores per chip
    c0, c1 = chip(backend, 0), chip(backend, 1)
    a = backend.create_vnpu(c0, "vir10_3c_16g", None, None)
    b = backend.create_vnpu(c0, "vir10_3c_16g", None, None)
    assert (a.vdev_id, a.vfg_id, b.vdev_id, b.vfg_id) == (100, 0, 101, 1)
    with pytest.raises(Busy):  # 20 of 20 cores taken
        backend.create_vnpu(c0, "vir03_1c_8g", None, None)
    with pytest.raises(BadParameter):  # vdev ids are unique on the node
        backend.create_vnpu(c1, "vir05_1c_8g", 101, None)
    with pytest.raises(BadParameter):
        backend.create_vnpu(c1, "vir05_1c_8g", 70000, None)
    d = backend.create_vnpu(c1, "vir05_1c_8g", None, 7)
    assert (d.vdev_id, d.vfg_id) == (102, 7)
    with pytest.raises(NoSuchDevice):
        backend.destroy_vnpu(c1, 100)  # it lives on chip 0
    backend.destroy_vnpu(c0, 100)
    with pytest.raises(NoSuchDevice):
        backend.destroy_vnpu(c0, 100)
    e = backend.create_vnpu(c0, "vir06_1c_16g", 100, None)  # freed cores and id are reusable
    assert (e.vdev_id, e.vfg_id) == (100, 0)
    assert [v.vdev_id for v in backend.read_dynamic(c0).vnpus.value or []] == [100, 101]


# ----- switch faults ---------------------------------------------------------------------


def test_sim_switch_fault_on_a3(make: Factory) -> None:
    backend = make("a3-16")
    sink = Recorder()
    backend.subscribe(sink)
    ev = backend.switch_fault(0x00F1FEF5, 155913, "cpu", switch_chip_id=1, switch_port_id=7, logic_id=3)
    assert ev.data.assembled_fault_code == "[0x00f1fef5,155913,cpu,na]"
    assert backend.switch_fault("0x08520003", None, "L2").data.assembled_fault_code == "[0x08520003,na,L2,na]"
    assert sink.events == [ev, sink.events[1]]
    assert isinstance(sink.events[0], RawSwitchEvent)
    assert sink.events[0].logic_id == 3
    assert ev.data.assertion is Assertion.OCCUR
    assert ev.data.alarm_raised_time > 0
    assert len(backend.active_switch_faults()) == 2
    backend.switch_fault(0x00F1FEF5, 155913, "cpu", assertion="recover", switch_chip_id=1, switch_port_id=7)
    assert [f.assembled_fault_code for f in backend.active_switch_faults()] == ["[0x08520003,na,L2,na]"]


@pytest.mark.parametrize("profile", [p for p in PROFILES if p != "a3-16"])
def test_sim_switch_fault_needs_a3(make: Factory, profile: str) -> None:
    backend = make(profile)
    sink = Recorder()
    backend.subscribe(sink)
    with pytest.raises(ValueError, match="a3-16"):
        backend.switch_fault(0x00F1FEF5, 155913, "cpu")
    assert sink.events == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"position": "gpu"}, "position"),
        ({"alarm_id": "0x1ffffffff"}, "alarm id"),
        ({"alarm_id": "zz"}, "alarm id"),
        ({"severity": 9}, "severity"),
        ({"switch_port_id": -1}, "switch_port_id"),
        ({"fault_id": -3}, "fault id"),
    ],
)
def test_sim_switch_fault_rejects_bad_arguments(make: Factory, kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"alarm_id": 0x00F1FEF5, "fault_id": 155913, "position": "cpu"} | kwargs
    with pytest.raises(ValueError, match=match):
        make("a3-16").switch_fault(**args)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_sim_die_ids_are_deterministic_and_distinct_per_chip(make: Factory, profile: str) -> None:
    """A VDIE on every chip, a DDIE on the 950 alone; the same words in every run (phy 0: the issue's example)."""
    backend, again = make(profile), make(profile, seed=7)
    vdies, ddies = set(), set()
    for address in backend.discover():
        static = backend.read_static(address)
        assert static == again.read_static(address)
        last = f"{0x12 + address.phy_id:08X}"
        assert static.vdie_id == f"00000001-0000ABCD-00000000-00000000-{last}"
        if backend.layout.family is ChipFamily.ASCEND950:
            assert static.ddie_id == f"00000002-0000DD1E-00000000-00000000-{last}"
        else:
            assert static.ddie_id is None
        vdies.add(static.vdie_id)
        ddies.add(static.ddie_id)
    assert len(vdies) == backend.layout.chip_count
    if backend.layout.family is ChipFamily.ASCEND950:
        assert len(ddies) == backend.layout.chip_count
    phy0 = next(a for a in backend.discover() if a.phy_id == 0)
    assert backend.read_static(phy0).vdie_id == "00000001-0000ABCD-00000000-00000000-00000012"
