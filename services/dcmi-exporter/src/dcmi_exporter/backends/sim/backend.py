"""A simulated Ascend node implementing the Backend protocol, plus a control surface for drills.

Locking: `_lock` guards chip state and is held only for short, non-blocking sections. `_control`
(re-entrant) serialises each state change together with the delivery of its events, so the
sink sees events in the order the state changed; readers never take it, so a slow sink cannot
delay a poll. No lock is held while a call deliberately hangs.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Sequence

from ascend_common.chips import ChipAddress
from ascend_common.clock import Clock, SystemClock
from ascend_common.faults.codes import LINK_DOWN_CODE, UB_PORT_DOWN_CODE, UBOE_PORT_DOWN_CODE
from ascend_common.products import UBOE_BOARDS
from ascend_common.schemas.exporter import (
    MAX_BURST,
    Assertion,
    ChipDynamic,
    ChipProcess,
    ChipStatic,
    Hbm,
    ResetChannel,
    SwitchFaultData,
    UbPorts,
    UrmaDevice,
    Utilization,
    Vnpu,
)
from ascend_common.schemas.reading import Reading
from ascend_common.vnpu import TEMPLATES, template_allowed

from dcmi_exporter.backends.base import (
    OPTICAL_INDEX_KEY,
    UB_COMMON_KEYS,
    UBOE_KEYS,
    UBOE_PORT_KEY,
    ChipTelemetry,
    EventSink,
    RawFaultEvent,
    RawSwitchEvent,
    UbPortLink,
    UbPortOptical,
    UbPortStat,
    optical_port_values,
    ub_port_stat,
    valid_vdev_id,
)
from dcmi_exporter.backends.dieid import DieType, format_die_id
from dcmi_exporter.backends.errors import (
    RC_NOT_SUPPORTED,
    RC_RESET_FAILED,
    BadParameter,
    Busy,
    CardDropped,
    NoSuchDevice,
    NotSupported,
    error_for,
)
from dcmi_exporter.backends.sim import telemetry
from dcmi_exporter.backends.sim.faults import (
    LINK_DOWN_SEVERITY,
    MAX_ERROR_CODES,
    MAX_PROCESSES,
    assemble_switch_code,
    check_severity,
    normalise_code,
    parse_assertion,
)
from dcmi_exporter.backends.sim.profiles import SIM_HOST_NICS, Profile, get_profile
from dcmi_exporter.backends.sim.state import (
    ActiveFault,
    FailNextReset,
    Hang,
    IdleJob,
    ResetFailMode,
    ResetProgress,
    SimChip,
    SimPort,
)

log = logging.getLogger(__name__)


HANG_POLL_S = 0.05  # a hung call re-checks its deadline this often (a ManualClock moves without notice)
IDLE_JOB_PROCESS_BYTES = 2 << 30  # each process of an idle job holds 2 GiB of HBM, as a real job would
TRAFFIC_PKTS_PER_S = 10_000  # network packets a busy chip moves per sim second (tx and rx each)
CPU_S_PER_S = 8  # CPU seconds a chip's process uses per sim second (a data loader's few cores)
# A 950 chip's ports as the simulator's `-g -dev_info` lists them, before `set_ub_port` changes
# one: four UB ports on each udie, and on a main board with a UBoE device (UBOE_BOARDS) a UBoE
# bonding port on each.
SIM_UB_PORTS = {(udie, port): "UB" for udie in (0, 1) for port in range(4)}
SIM_UBOE_PORTS = {(0, 8): "ETH", (1, 8): "ETH"}
SIM_NETWORK_UNSUPPORTED_BOARDS = frozenset({0x68})  # the Atlas 350 1P: no NetworkCollector on the 950
SIM_OPTICAL_UNSUPPORTED_BOARDS = frozenset({0x68, 0x6B, 0x6C, 0x03, 0x07})  # no OpticalCollector on the 950
FIRST_AUTO_VDEV_ID = 100  # the driver numbers vNPUs from 100 so they never collide with phy ids
MAX_VNPU_ID = 65535

Event = RawFaultEvent | RawSwitchEvent


def _int_or_unsupported(value: int | None) -> Reading[int]:
    return Reading[int].ok(value) if value is not None else Reading[int].error(RC_NOT_SUPPORTED)


def _str_or_unsupported(value: str | None) -> Reading[str]:
    return Reading[str].ok(value) if value is not None else Reading[str].error(RC_NOT_SUPPORTED)


def _urma(devices: list[list[str]] | None) -> list[UrmaDevice] | None:
    return None if devices is None else [UrmaDevice(index=i, eids=eids) for i, eids in enumerate(devices)]


def _die_id(words: tuple[int, ...] | None) -> str | None:
    return format_die_id(words) if words is not None else None


class SimBackend:
    """A simulated node; see the package docstring for the control surface."""

    kind: str = "sim"

    def __init__(self, profile: str, clock: Clock | None = None, seed: int = 0, subscription: bool = True) -> None:
        self.layout: Profile = get_profile(profile)  # ValueError for an unknown profile
        self.profile: str | None = profile
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.seed = seed
        self.subscription_supported = subscription
        self._lock = threading.Lock()
        self._control = threading.RLock()
        self._sink: EventSink | None = None
        self._origin = self.clock.monotonic()
        self._addresses = self.layout.addresses()
        traits = telemetry.traits_for(seed, [a.logic_id for a in self._addresses])
        self._chips: dict[int, SimChip] = {a.logic_id: SimChip(a, traits[a.logic_id]) for a in self._addresses}
        # The cards a drill can drop: none on a v2 (950) profile, whose chips belong to no card.
        self._cards: frozenset[int] = frozenset(a.card_id for a in self._addresses if a.card_id >= 0)
        self._dropped: set[int] = set()
        self._switch_active: dict[tuple[str, int, int], SwitchFaultData] = {}

    # ----- Backend protocol -------------------------------------------------------------

    def init(self) -> None:
        """Nothing to load: the simulated library is always present."""

    def version(self) -> Reading[str]:
        return Reading[str].ok(self.layout.dcmi_version)

    def discover(self) -> list[ChipAddress]:
        # A dropped card stays listed, as with the real driver: its chips answer "not ready".
        return list(self._addresses)

    def read_static(self, chip: ChipAddress) -> ChipStatic:
        st = self._enter(chip, "dcmi_get_device_chip_info_v2")
        lay = self.layout
        phy = st.addr.phy_id
        partner = lay.partner_card(st.addr.card_id)
        ip = lay.device_ip(phy)
        return ChipStatic(
            chip_type=Reading[str].ok(lay.chip_type),
            chip_name=Reading[str].ok(lay.chip_name),
            chip_version=Reading[str].ok(lay.chip_version),
            aicore=Reading[int].ok(lay.aicore),
            board_id=Reading[int].ok(lay.board_id),
            product_type=_str_or_unsupported(lay.product_type),
            partner_card=_int_or_unsupported(partner),
            numa_node=Reading[int].ok(lay.numa_node(phy)),
            device_ip=_str_or_unsupported(ip),
            super_pod_id=_int_or_unsupported(lay.super_pod_id),
            server_index=_int_or_unsupported(lay.server_index),
            super_device_id=_int_or_unsupported(lay.super_device_id(phy)),
            main_board_id=_int_or_unsupported(lay.main_board_id),
            rack_id=_int_or_unsupported(lay.rack_id),
            super_pod_type=_int_or_unsupported(lay.super_pod_type),
            scale_type=_int_or_unsupported(lay.scale_type),
            vdie_id=_die_id(lay.die_id_words(phy, DieType.VDIE)),
            ddie_id=_die_id(lay.die_id_words(phy, DieType.DDIE)),
            urma=_urma(lay.urma_devices(phy)),
        )

    def read_dynamic(self, chip: ChipAddress) -> ChipDynamic:
        st = self._enter(chip, "dcmi_get_device_health")
        now = self.clock.monotonic()
        with self._lock:
            codes = list(st.codes)[:MAX_ERROR_CODES]
            health = st.health()
            network_down = st.network_down
            processes = list(st.processes)
            idle = st.idle_job is not None
            vnpus = sorted(st.vnpus.values(), key=lambda v: v.vdev_id)
            boot = st.boot_status(now, self.clock.time_scale)
        lay = self.layout
        t = (now - self._origin) * self.clock.time_scale
        util = 0 if idle else telemetry.aicore_util(st.traits, t, len(processes))
        used = telemetry.hbm_used_mb(st.traits, lay.hbm_mb, [p.memory_bytes for p in processes])
        hbm_pct = round(100 * used / lay.hbm_mb) if processes else 0
        temp = telemetry.temperature_c(st.traits, t, util)
        return ChipDynamic(
            health=Reading[int].ok(health),
            error_codes=Reading[list[str]].ok(codes),
            network_health=(
                Reading[int].ok(1 if network_down else 0) if lay.has_network else Reading[int].error(RC_NOT_SUPPORTED)
            ),
            hbm=Reading[Hbm].ok(
                Hbm(
                    total_mb=lay.hbm_mb,
                    used_mb=used,
                    frequency_mhz=lay.hbm_frequency_mhz,
                    temperature_c=temp + 2,
                    bandwidth_util_pct=util // 2,
                )
            ),
            temperature_c=Reading[int].ok(temp),
            power_w=Reading[float].ok(telemetry.power_w(lay, st.traits, t, util)),
            utilization=Reading[Utilization].ok(Utilization(aicore_pct=util, hbm_pct=hbm_pct)),
            processes=Reading[list[ChipProcess]].ok(processes),
            boot_status=Reading[int].ok(boot),
            vnpus=Reading[list[Vnpu]].ok(vnpus),
        )

    def subscribe(self, sink: EventSink) -> bool:
        """Register the sink; False (and no events ever) when built with subscription=False."""
        if not self.subscription_supported:
            return False
        self._sink = sink
        return True

    def set_sink(self, sink: EventSink | None) -> None:
        """Replace (or, with None, detach) the sink; honours subscription=False like subscribe()."""
        if sink is None:
            self._sink = None
        else:
            self.subscribe(sink)

    def outband_supported(self, chip: ChipAddress) -> bool:
        self._enter(chip, "dcmi_get_device_outband_channel_state")
        return self.layout.outband

    def reset(self, chip: ChipAddress, channel: ResetChannel) -> None:
        """Start a reset; raises Busy with processes, NotSupported for an unavailable channel.

        A successful reset clears the chip's non-persistent codes at once (recover events);
        a link-down code stays while the network is down. Boot status then walks
        RESET_STAGES over ~3 s of sim time.
        """
        op = "dcmi_set_device_reset"
        st = self._enter(chip, op)
        if ResetChannel(channel) is ResetChannel.OUTBAND and not self.layout.outband:
            raise NotSupported(op, message=f"no out-of-band reset channel on profile {self.layout.name}")
        with self._control:
            events: list[Event] = []
            with self._lock:
                if st.processes:
                    raise Busy(op, message=f"chip {st.addr.logic_id} runs {len(st.processes)} process(es)")
                fail, st.fail_next_reset = st.fail_next_reset, None
                if fail is not None and fail.mode is ResetFailMode.ERROR:
                    raise error_for(op, fail.code)
                stuck = fail is not None
                st.reset = ResetProgress(started=self.clock.monotonic(), stuck=stuck)
                if not stuck:
                    for code in [c for c, f in st.codes.items() if self._reset_clears(st, c, f)]:
                        fault = st.codes.pop(code)
                        events.append(self._fault_event(st, code, fault.severity, Assertion.RECOVER))
            self._emit(events)

    def boot_status(self, chip: ChipAddress) -> int:
        st = self._enter(chip, "dcmi_get_device_boot_status")
        now = self.clock.monotonic()
        with self._lock:
            return st.boot_status(now, self.clock.time_scale)

    def create_vnpu(self, chip: ChipAddress, template: str, vdev_id: int | None, vfg_id: int | None) -> Vnpu:
        """Errors: BadParameter (-8001) for a template the family does not allow, an id out of
        0..65535 or a vdev id already used on the node; Busy (-8020) when the chip's AI cores
        are all taken by other vNPUs (the request is fine, the chip has no room: a conflict)."""
        op = "dcmi_create_vdevice"
        st = self._enter(chip, op)
        if self.layout.library_v2:
            raise NotSupported(op, message="the v2 library (950) has no vNPU call")
        tpl = TEMPLATES.get(template)
        family = self.layout.family
        if tpl is None or not template_allowed(family, template):
            raise BadParameter(op, message=f"template {template!r} is not allowed on {family.value}")
        for label, value in (("vdev_id", vdev_id), ("vfg_id", vfg_id)):
            if value is not None and not 0 <= value <= MAX_VNPU_ID:
                raise BadParameter(op, message=f"{label} {value} out of range 0..{MAX_VNPU_ID}")
        with self._lock:
            # vdev ids name /dev/vdavinci<N> devices, so they are unique across the node.
            used_ids = {v for c in self._chips.values() for v in c.vnpus}
            if vdev_id is not None and vdev_id in used_ids:
                raise BadParameter(op, message=f"vdev_id {vdev_id} already exists")
            taken = sum(v.aicore for v in st.vnpus.values())
            if taken + tpl.aicore > self.layout.aicore:
                raise Busy(
                    op,
                    message=f"chip {st.addr.logic_id} has {self.layout.aicore - taken} free AI cores, "
                    f"{template} needs {tpl.aicore}",
                )
            if vdev_id is None:
                vdev_id = FIRST_AUTO_VDEV_ID
                while vdev_id in used_ids:
                    vdev_id += 1
            if vfg_id is None:
                used_groups = {v.vfg_id for v in st.vnpus.values()}
                vfg_id = 0
                while vfg_id in used_groups:
                    vfg_id += 1
            vnpu = Vnpu(vdev_id=vdev_id, vfg_id=vfg_id, template=tpl.name, suffix=tpl.suffix, aicore=tpl.aicore)
            st.vnpus[vdev_id] = vnpu
        return vnpu

    def destroy_vnpu(self, chip: ChipAddress, vdev_id: int) -> None:
        op = "dcmi_set_destroy_vdevice"
        st = self._enter(chip, op)
        if self.layout.library_v2:
            raise NotSupported(op, message="the v2 library (950) has no vNPU call")
        with self._lock:
            if st.vnpus.pop(vdev_id, None) is None:
                raise NoSuchDevice(op, message=f"no vNPU {vdev_id} on chip {st.addr.logic_id}")

    def host_addresses(self) -> dict[str, list[str]]:
        """The simulated host's NIC addresses (nics.host_addresses on a real node): the simulator models a
        node, so the machine it runs on lends it none of its own."""
        return {name: list(addrs) for name, addrs in SIM_HOST_NICS.items()}

    def close(self) -> None:
        self._sink = None
        self.release_all()

    # ----- control surface (drills, scenarios, the exporter's sim API) -------------------

    def inject_fault(
        self,
        logic_id: int,
        code: str | int,
        assertion: Assertion | str,
        severity: int = 2,
        persistent: bool = False,
    ) -> RawFaultEvent:
        """occur adds the code, recover removes it, once only fires the event."""
        st = self._control_chip(logic_id)
        norm = normalise_code(code)
        kind = parse_assertion(assertion)
        check_severity(severity)
        with self._control:
            with self._lock:
                event = self._apply_locked(st, norm, kind, severity, persistent)
            self._emit([event])
        return event

    def burst(self, logic_id: int, code: str | int, count: int, mode: str = "flap", severity: int = 2) -> int:
        """Fire `count` events: flap alternates occur/recover (recovered at the end when the count
        is even), once fires `count` once events. Returns the number of events fired."""
        st = self._control_chip(logic_id)
        norm = normalise_code(code)
        check_severity(severity)
        if mode not in ("flap", "once"):
            raise ValueError(f"invalid burst mode {mode!r}: expected 'flap' or 'once'")
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_BURST:
            raise ValueError(f"invalid burst count {count!r}: expected 1..{MAX_BURST}")
        with self._control:
            for i in range(count):
                flap_kind = Assertion.OCCUR if i % 2 == 0 else Assertion.RECOVER
                kind = Assertion.ONCE if mode == "once" else flap_kind
                with self._lock:
                    event = self._apply_locked(st, norm, kind, severity, False)
                self._emit([event])
        return count

    def drop_card(self, card_id: int, dropped: bool = True) -> None:
        """Every call for the card's chips raises CardDropped (-8012) until undropped."""
        self.check_card(card_id)
        with self._lock:
            if dropped:
                self._dropped.add(card_id)
            else:
                self._dropped.discard(card_id)

    def check_card(self, card_id: int) -> None:
        """KeyError for a card the node does not have."""
        if card_id not in self._cards:
            raise KeyError(f"unknown card id {card_id!r}")

    def card_of(self, logic_id: int) -> int:
        return self._control_chip(logic_id).addr.card_id

    def set_network(self, logic_id: int, healthy: bool, event: bool = True) -> None:
        """Link down: network_health 1 and code 81078603 occurs; link up: it recovers.

        Only a change fires an event. Without `event` the link changes but the driver's event is lost
        (no code either): what the exporter's RoCE link polling looks for. ValueError on 310 profiles
        (no RoCE port)."""
        st = self._control_chip(logic_id)
        if not self.layout.has_network:
            raise ValueError(f"profile {self.layout.name} has no chip network")
        with self._control:
            with self._lock:
                if st.network_down == (not healthy):
                    return
                st.network_down = not healthy
                if not event:
                    return
                kind = Assertion.RECOVER if healthy else Assertion.OCCUR
                fired = self._apply_locked(st, LINK_DOWN_CODE, kind, LINK_DOWN_SEVERITY, False)
            self._emit([fired])

    def link_status(self, logic_id: int) -> str:
        """The RoCE link as `hccn_tool -i <phy> -link -g` names it. ValueError on 310 profiles."""
        st = self._control_chip(logic_id)
        if not self.layout.has_network or self.layout.library_v2:
            raise ValueError(f"profile {self.layout.name} has no RoCE link")
        with self._lock:
            return "DOWN" if st.network_down else "UP"

    def hang(self, logic_id: int, seconds: float | None) -> None:
        """Calls for this chip block until release() or `seconds` of sim time pass (None: until released)."""
        st = self._control_chip(logic_id)
        if seconds is not None and (isinstance(seconds, bool) or not math.isfinite(seconds) or seconds <= 0):
            raise ValueError(f"invalid hang duration {seconds!r}: expected a positive number of seconds or None")
        deadline = None if seconds is None else self.clock.monotonic() + seconds / self.clock.time_scale
        with self._lock:
            if st.hang is not None and not st.hang.released.is_set():
                st.hang.deadline = deadline  # extend or shorten the hang the waiters already see
            else:
                st.hang = Hang(released=threading.Event(), deadline=deadline)

    def release(self, logic_id: int) -> None:
        st = self._control_chip(logic_id)
        with self._lock:
            hang, st.hang = st.hang, None
        if hang is not None:
            hang.released.set()

    def release_all(self) -> None:
        with self._lock:
            hangs = [c.hang for c in self._chips.values() if c.hang is not None]
            for c in self._chips.values():
                c.hang = None
        for hang in hangs:
            hang.released.set()

    def is_hung(self, logic_id: int) -> bool:
        st = self._control_chip(logic_id)
        hang = st.hang
        return hang is not None and not hang.released.is_set() and not self._expired(hang)

    def set_processes(self, logic_id: int, processes: Iterable[tuple[int, int]]) -> None:
        """Replace the chip's processes: (pid, memory in bytes) pairs, at most 32, distinct pids."""
        st = self._control_chip(logic_id)
        procs: list[ChipProcess] = []
        for entry in processes:
            pid, mem = entry
            if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
                raise ValueError(f"invalid pid {pid!r}")
            if isinstance(mem, bool) or not isinstance(mem, int) or mem < 0:
                raise ValueError(f"invalid memory size {mem!r} for pid {pid}")
            procs.append(ChipProcess(pid=pid, memory_bytes=mem))
        if len(procs) > MAX_PROCESSES:
            raise ValueError(f"{len(procs)} processes: the library reports at most {MAX_PROCESSES}")
        if len({p.pid for p in procs}) != len(procs):
            raise ValueError("duplicate pid")
        with self._lock:
            st.processes = procs
            st.idle_job = None  # another process list is another job

    def start_idle_job(self, logic_id: int, pids: Iterable[int]) -> None:
        """A hung job on the chip: it lists `pids`, its AI core reads 0, and its network counters
        and the processes' CPU time stop moving (what hung-job detection looks for)."""
        pid_list = list(pids)
        if not pid_list:
            raise ValueError("an idle job needs at least one pid")
        self.set_processes(logic_id, [(pid, IDLE_JOB_PROCESS_BYTES) for pid in pid_list])
        st = self._control_chip(logic_id)
        with self._lock:
            st.idle_job = IdleJob(pids=frozenset(pid_list), since=self._sim_seconds())

    def end_idle_job(self, logic_id: int) -> None:
        """The idle job ends: its processes are gone, AI core and counters are back to normal."""
        st = self._control_chip(logic_id)
        with self._lock:
            st.idle_job = None
            st.processes = []

    def traffic(self, logic_id: int) -> tuple[int, int]:
        """(tx, rx) packet counters of the chip's network: moving, or still during an idle job."""
        st = self._control_chip(logic_id)
        with self._lock:
            idle = st.idle_job
        t = idle.since if idle is not None else self._sim_seconds()
        base = int(t * TRAFFIC_PKTS_PER_S)
        return base + 7 * logic_id, base + 3 * logic_id

    def set_ub_port(
        self, logic_id: int, udie: int, port: int, kind: str, up: bool, enabled: bool = True, event: bool = True
    ) -> None:
        """Set one 950 port as `hccn_tool -g -dev_info` / `-port_info` would show it. With `event`, the
        plane's first port going down raises its code (UB 81B18603, ETH 81078607) and its last one
        coming up clears it, as the driver does (an unwired UB port does not count; ETH ports have no
        port_enable); without `event`, the driver's event is lost.
        ValueError on other families or an unknown port kind."""
        st = self._control_chip(logic_id)
        if not self.layout.library_v2:
            raise ValueError(f"profile {self.layout.name} has no UB ports")
        code = {"UB": UB_PORT_DOWN_CODE, "ETH": UBOE_PORT_DOWN_CODE}.get(kind)
        if code is None:
            raise ValueError(f"port kind {kind!r}: UB or ETH")
        with self._control:
            with self._lock:
                before = self._plane_down(st, kind)
                st.ports[(udie, port)] = SimPort(kind=kind, up=up, enabled=enabled)
                after = self._plane_down(st, kind)
                if not event or before == after:
                    return
                kind_ = Assertion.OCCUR if after else Assertion.RECOVER
                fired = self._apply_locked(st, code, kind_, LINK_DOWN_SEVERITY, False)
            self._emit([fired])

    @staticmethod
    def _plane_down(st: SimChip, kind: str) -> bool:
        return any(p.kind == kind and not p.up and (p.enabled or kind == "ETH") for p in st.ports.values())

    def ub_ports(self, logic_id: int) -> UbPorts:
        """The down-port counts `GetUBPortsDownSnapshot` would give (unwired UB ports not counted)."""
        st = self._control_chip(logic_id)
        if not self.layout.library_v2:
            raise ValueError(f"profile {self.layout.name} has no UB ports")
        with self._lock:
            ports = list(st.ports.values())
        return UbPorts(
            ub_down=sum(1 for p in ports if p.kind == "UB" and not p.up and p.enabled),
            bonding_down=sum(1 for p in ports if p.kind == "ETH" and not p.up),
        )

    def cpu_seconds(self, pids: Iterable[int]) -> int:
        """CPU seconds of host processes: the pids of an idle job stopped; any other pid runs."""
        with self._lock:
            stopped = {pid: job.since for st in self._chips.values() if (job := st.idle_job) for pid in job.pids}
        now = self._sim_seconds()
        return sum(int(stopped.get(pid, now) * CPU_S_PER_S) for pid in pids)

    def start_times(self, pids: Iterable[int]) -> tuple[int | None, ...]:
        """Start times of host processes: an idle job's pids started with the job (a new job on the
        same pids is other processes); any other pid at the simulator's start."""
        with self._lock:
            started = {pid: job.since for st in self._chips.values() if (job := st.idle_job) for pid in job.pids}
        return tuple(int(started.get(pid, 0.0) * 1000) for pid in pids)

    def _sim_seconds(self) -> float:
        return (self.clock.monotonic() - self._origin) * self.clock.time_scale

    def fail_next_reset(self, logic_id: int, mode: ResetFailMode | str = "error", code: int = RC_RESET_FAILED) -> None:
        """Arm a one-shot failure: error -> reset() raises the error for `code` (ResetFailed for
        -8015); stuck -> reset() is accepted but boot status never reaches 16 (codes stay)."""
        st = self._control_chip(logic_id)
        try:
            fail_mode = ResetFailMode(mode)
        except ValueError:
            raise ValueError(f"invalid reset failure mode {mode!r}: expected 'error' or 'stuck'") from None
        if isinstance(code, bool) or not isinstance(code, int) or code >= 0:
            raise ValueError(f"invalid DCMI error code {code!r}: expected a negative return code")
        with self._lock:
            st.fail_next_reset = FailNextReset(mode=fail_mode, code=code)

    def switch_fault(
        self,
        alarm_id: int | str,
        fault_id: int | None = None,
        position: str = "na",
        assertion: Assertion | str = Assertion.OCCUR,
        severity: int = 2,
        switch_chip_id: int = 0,
        switch_port_id: int = 0,
        peer_port_device: int = 0,
        peer_port_id: int = 0,
        event_type: int = 0,
        logic_id: int | None = None,
    ) -> RawSwitchEvent:
        """Emit an A3 switch (L1/L2) event; ValueError on profiles without switches."""
        if not self.layout.switch_faults:
            raise ValueError(f"profile {self.layout.name} has no switch: switch faults need a3-16")
        if logic_id is not None:
            self._control_chip(logic_id)
        kind = parse_assertion(assertion)
        check_severity(severity)
        for label, value in (
            ("switch_chip_id", switch_chip_id),
            ("switch_port_id", switch_port_id),
            ("peer_port_device", peer_port_device),
            ("peer_port_id", peer_port_id),
            ("event_type", event_type),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"invalid {label} {value!r}")
        data = SwitchFaultData(
            event_type=event_type,
            assembled_fault_code=assemble_switch_code(alarm_id, fault_id, position),
            peer_port_device=peer_port_device,
            peer_port_id=peer_port_id,
            switch_chip_id=switch_chip_id,
            switch_port_id=switch_port_id,
            severity=severity,
            assertion=kind,
            alarm_raised_time=self._now_ms(),
        )
        event = RawSwitchEvent(logic_id=logic_id, data=data)
        key = (data.assembled_fault_code, switch_chip_id, switch_port_id)
        with self._control:
            with self._lock:
                if kind is Assertion.OCCUR:
                    self._switch_active[key] = data
                elif kind is Assertion.RECOVER:
                    self._switch_active.pop(key, None)
            self._emit([event])
        return event

    def active_switch_faults(self) -> list[SwitchFaultData]:
        with self._lock:
            return list(self._switch_active.values())

    # ----- internals ----------------------------------------------------------------------

    def _control_chip(self, logic_id: int) -> SimChip:
        st = self._chips.get(logic_id) if isinstance(logic_id, int) and not isinstance(logic_id, bool) else None
        if st is None:
            raise KeyError(f"unknown logic id {logic_id!r}")
        return st

    def _lookup(self, chip: ChipAddress, op: str) -> SimChip:
        st = self._chips.get(chip.logic_id)
        if st is None or st.addr != chip:
            raise NoSuchDevice(op, message=f"no chip {chip}")
        return st

    def _enter(self, chip: ChipAddress, op: str) -> SimChip:
        """Common prologue of every chip call: hang if told to (no lock held), then fail if dropped."""
        st = self._lookup(chip, op)
        self._wait_while_hung(st)
        with self._lock:
            dropped = st.addr.card_id in self._dropped
        if dropped:
            raise CardDropped(op, message=f"card {st.addr.card_id} is not ready")
        return st

    def _wait_while_hung(self, st: SimChip) -> None:
        while True:
            hang = st.hang  # one attribute read: atomic, no lock needed
            if hang is None or hang.released.is_set():
                return
            if self._expired(hang):
                with self._lock:
                    if st.hang is hang:
                        st.hang = None
                hang.released.set()
                return
            hang.released.wait(HANG_POLL_S)

    def _expired(self, hang: Hang) -> bool:
        return hang.deadline is not None and self.clock.monotonic() >= hang.deadline

    @staticmethod
    def _reset_clears(st: SimChip, code: str, fault: ActiveFault) -> bool:
        if fault.persistent:
            return False
        # The link is still down after the reset, so the driver reports the code again.
        return not (code == LINK_DOWN_CODE and st.network_down)

    def _apply_locked(self, st: SimChip, code: str, kind: Assertion, severity: int, persistent: bool) -> RawFaultEvent:
        if kind is Assertion.OCCUR:
            st.codes[code] = ActiveFault(severity=severity, persistent=persistent)
        elif kind is Assertion.RECOVER:
            st.codes.pop(code, None)
        return self._fault_event(st, code, severity, kind)

    def _fault_event(self, st: SimChip, code: str, severity: int, kind: Assertion) -> RawFaultEvent:
        name = "RoCE link down" if code == LINK_DOWN_CODE else f"sim fault {code}"
        return RawFaultEvent(
            logic_id=st.addr.logic_id,
            code=code,
            severity=severity,
            assertion=kind,
            raised_at_ms=self._now_ms(),
            name=name,
        )

    def _emit(self, events: Sequence[Event]) -> None:
        sink = self._sink
        if sink is None:
            return
        for event in events:
            try:
                sink(event)
            except Exception:  # a broken consumer must not break the drill that injected the fault
                log.exception("sim event sink failed")

    def _now_ms(self) -> int:
        return int(self.clock.now() * 1000)

    # ---------------------------------------------------------------- metrics (npu-exporter parity)

    def read_telemetry(self, chip: ChipAddress) -> ChipTelemetry:
        """The extra metric families' reads, from the same model as `read_dynamic`: HBM ECC on the
        HBM families, PCIe bandwidth on the 910B and 950, HCCS on the 910B and A3, SIO on the A3 and
        950, DDR memory on the 310 families (their `hbm_mb` is their DDR), as a driver answers them."""
        st = self._enter(chip, "dcmi_get_device_voltage")
        now = self.clock.monotonic()
        with self._lock:
            processes_mem = list(st.processes)
            processes = len(processes_mem)
            idle = st.idle_job is not None
            vnpus = sorted(st.vnpus.values(), key=lambda v: v.vdev_id)
        t = (now - self._origin) * self.clock.time_scale
        util = 0 if idle else telemetry.aicore_util(st.traits, t, processes)
        family = self.layout.family
        lay = self.layout
        used = telemetry.hbm_used_mb(st.traits, lay.hbm_mb, [p.memory_bytes for p in processes_mem])
        return ChipTelemetry(
            voltage_v=round(0.80 + util / 1000, 2),
            aicore_freq_mhz=1800 if util else 800,
            vector_pct=util * 4 // 5,
            cube_pct=util * 9 // 10,
            overall_pct=util,
            hbm_ecc=telemetry.hbm_ecc(st.traits) if family in telemetry.HBM_FAMILIES else None,
            pcie=telemetry.pcie_bandwidth(util, chip.phy_id) if family in telemetry.PCIE_FAMILIES else None,
            hccs=telemetry.hccs_stats(util, chip.phy_id, t) if family in telemetry.HCCS_FAMILIES else None,
            hccs_bandwidth=telemetry.hccs_bandwidth(util, 200) if family in telemetry.HCCS_FAMILIES else None,
            sio_crc_err=(0, 0) if family in telemetry.SIO_FAMILIES else None,
            memory=telemetry.ddr_memory(lay.hbm_mb, used) if family in telemetry.DDR_FAMILIES else None,
            serial_number=telemetry.serial_number(chip.card_id, chip.logic_id),
            # As the driver answers VDEV_MNG for every vNPU the chip has; the metrics keep the 310P's.
            vnpus=tuple(
                telemetry.vnpu_activity(v, lay.aicore, lay.hbm_mb, st.traits, util)
                for v in vnpus
                if valid_vdev_id(v.vdev_id)
            ),
        )

    def net_stats(self, logic_id: int) -> dict[str, int] | None:
        """`hccn_tool -i <phy> -stat -g` as the driver would print it, from the traffic counters;
        None on a card without a RoCE port (310) and on the 950 (UB, not RoCE)."""
        if not self.layout.has_network or self.layout.library_v2:
            return None
        tx, rx = self.traffic(logic_id)
        return telemetry.roce_stats(tx, rx)

    def ub_port_table(self) -> dict[tuple[int, int], str]:
        """(udie, port) -> kind ("UB", or "ETH" for a UBoE bonding port) of a 950 chip's ports as
        `-g -dev_info` lists them: SIM_UB_PORTS, the UBoE ones on a main board with a UBoE device."""
        board = self.layout.main_board_id
        return {**SIM_UB_PORTS, **(SIM_UBOE_PORTS if board in UBOE_BOARDS else {})}

    def ub_stats(self, logic_id: int) -> list[UbPortStat] | None:
        """`hccn_tool -g -stat -i <logic> -u <udie> -p <port>` of each port, udie 0 then 1, as the
        tool prints it (the flits from the traffic counters, spread over the ports that are up; no
        error); None off the 950."""
        if not self.layout.library_v2:
            return None
        st = self._control_chip(logic_id)
        tx, rx = self.traffic(logic_id)
        with self._lock:
            kinds = {**self.ub_port_table(), **{key: port.kind for key, port in st.ports.items()}}
            up = {key: key not in st.ports or st.ports[key].up for key in kinds}
        live = max(1, sum(up.values()))
        out: list[UbPortStat] = []
        for udie, port in sorted(key for key in kinds if key[0] in (0, 1)):
            text = dict.fromkeys((*UB_COMMON_KEYS, *UBOE_KEYS), "0")
            if up[(udie, port)]:
                text["tx_busi_flit_num"], text["rx_busi_flit_num"] = str(tx // live), str(rx // live)
            text[UBOE_PORT_KEY] = "1" if kinds[(udie, port)] == "ETH" else "0"
            out.append(ub_port_stat(udie, port, text))
        return out

    def ub_links(self, logic_id: int) -> list[UbPortLink] | None:
        """Each 950 port's link state (its `set_ub_port` state, up by default), bandwidth (the chip's
        RoCE-like busy figure spread over the ports that are up) and speed (400 G; none when down,
        as the tool's NA), udie 0 then 1; None off the 950 and on the Atlas 350 1P board (0x68),
        where npu-exporter's NetworkCollector does not run."""
        if not self.layout.library_v2 or self.layout.main_board_id in SIM_NETWORK_UNSUPPORTED_BOARDS:
            return None
        st = self._control_chip(logic_id)
        with self._lock:
            keys = sorted(key for key in {**self.ub_port_table(), **st.ports} if key[0] in (0, 1))
            up = {key: key not in st.ports or st.ports[key].up for key in keys}
            idle = st.idle_job is not None
        live = max(1, sum(up.values()))
        out: list[UbPortLink] = []
        for key in keys:
            if not up[key]:
                out.append(UbPortLink(key[0], key[1], {"link_status": 0, "bandwidth_tx": 0.0, "bandwidth_rx": 0.0}))
                continue
            busy = 0.0 if idle else round((1200.0 + logic_id) / live, 2)
            values = {"link_status": 1, "bandwidth_tx": busy, "bandwidth_rx": busy, "link_speed": 400}
            out.append(UbPortLink(key[0], key[1], values))
        return out

    def ub_optical(self, logic_id: int) -> list[UbPortOptical] | None:
        """Each 950 port's optical module as the tool's second table gives it: one module, steady lane
        powers (a down port's receive lanes dark: no reading); None off the 950 and on the main
        boards npu-exporter's OpticalCollector skips (the Atlas 350 ones among our profiles)."""
        if not self.layout.library_v2 or self.layout.main_board_id in SIM_OPTICAL_UNSUPPORTED_BOARDS:
            return None
        st = self._control_chip(logic_id)
        with self._lock:
            keys = sorted(key for key in {**self.ub_port_table(), **st.ports} if key[0] in (0, 1))
            up = {key: key not in st.ports or st.ports[key].up for key in keys}
        out: list[UbPortOptical] = []
        for key in keys:
            info = {OPTICAL_INDEX_KEY: "1"}
            for lane in range(4):
                info[f"TxPower Lane{lane}(dBm)"] = f"{1.5 + lane / 10:.2f}"
                info[f"RxPower Lane{lane}(dBm)"] = f"{0.8 + lane / 10:.2f}" if up[key] else "NA"
            out.append(UbPortOptical(key[0], key[1], optical_port_values(info)))
        return out

    def optical(self, logic_id: int) -> dict[str, float] | None:
        """`hccn_tool -i <phy> -optical -g` as npu-exporter keeps it: a present module, steady
        readings, a little colder with the link down."""
        if not self.layout.has_network or self.layout.library_v2:
            return None
        st = self._control_chip(logic_id)
        with self._lock:
            down = st.network_down
        return telemetry.optical(st.traits, down)

    def link(self, logic_id: int) -> dict[str, float] | None:
        """The RoCE port's state, speed, link-up count and bandwidth as npu-exporter keeps them; the
        state follows the chip's network (`set_network`)."""
        if not self.layout.has_network or self.layout.library_v2:
            return None
        st = self._control_chip(logic_id)
        with self._lock:
            down = st.network_down
            idle = st.idle_job is not None
        busy = 0.0 if down or idle else 1200.0 + logic_id
        return {
            "link_status": 0 if down else 1,
            "link_speed": 200_000,
            "link_up_num": 1,
            "bandwidth_tx": busy,
            "bandwidth_rx": busy,
        }
