"""`DcmiBackend`: the Backend protocol on top of the real chip library (libdcmi.so).

Every method may block in C (a dropped card can make a call hang): the exporter calls them only
through its CallGuard, and this class never holds a lock across a library call. Per-field
failures come back as `Reading.error(code)` so one unsupported field never hides the others; the
one exception is the health call answering -8012 (not ready), which raises CardDropped so that
the caller reports the synthetic card-drop code (the reference appends 0x40F84E00 on exactly
that condition).

The library comes in two generations (generations.py): `init` settles which one this library
speaks, as the reference does, and every call after it goes through that generation's symbol
and chip address. A v2 (950) chip has no card: it is reported with card and device id -1.
"""

from __future__ import annotations

import ctypes
import ipaddress
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ascend_common.chip_traits import FamilyTraits, SuperPodFields, traits
from ascend_common.chips import ChipAddress, ChipFamily, detect_family
from ascend_common.schemas.exporter import (
    Assertion,
    ChipDynamic,
    ChipProcess,
    ChipStatic,
    Hbm,
    ResetChannel,
    UrmaDevice,
    Utilization,
    Vnpu,
)
from ascend_common.schemas.reading import Reading
from ascend_common.vnpu import TEMPLATES

from dcmi_exporter.backends.base import (
    HCCS_PORTS,
    PCIE_KINDS,
    ChipTelemetry,
    EventSink,
    HbmEcc,
    HccsBandwidth,
    HccsStats,
    Memory,
    PcieBandwidth,
    RawFaultEvent,
    VnpuActivity,
    valid_vdev_id,
)
from dcmi_exporter.backends.dcmi import structs as s
from dcmi_exporter.backends.dcmi.generations import NO_CARD, V1, V2, Generation
from dcmi_exporter.backends.dcmi.library import DEFAULT_LIB_PATH, DcmiLibrary
from dcmi_exporter.backends.dieid import DieType, format_die_id
from dcmi_exporter.backends.errors import (
    RC_INTERNAL,
    RC_NOT_READY,
    BadParameter,
    CardDropped,
    DcmiError,
    NotSupported,
    error_for,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_CARDS = 64  # the reference's HiAIMaxCardNum: size of the card-list (and v2 device-list) buffer
MAX_DEVICES_PER_CARD = 64  # sanity bound on dcmi_get_device_num_in_card
UTIL_AICORE = 2  # dcmi_get_device_utilization_rate input types
UTIL_HBM = 6
PORT_TYPE_ROCE = 1  # enum dcmi_port_type
INBAND_CHANNEL = 1  # enum dcmi_reset_channel
OUTBAND_CHANNEL = 0
OUTBAND_READY = 1  # dcmi_get_device_outband_channel_state
ANY_ID = 0xFFFFFFFF  # vNPU / vfg id: let the library choose
VERSION_BUF = 64
PRODUCT_TYPE_BUF = 256
AFFINITY_BUF = 256  # the driver writes at most TOPO_INFO_MAX_LENTH (32) bytes
DEFAULT_NUMA_ROOT = "/sys/devices/system/node"
UNIT_TYPE_NPU = 0  # enum dcmi_unit_type NPU_TYPE
MAIN_CMD_CHIP_INF = 12  # enum dcmi_main_cmd DCMI_MAIN_CMD_CHIP_INF (the reference's MainCmdChipInf)
CHIP_INF_SUB_CMD_SPOD_INFO = 1  # the reference's CinfSubCmdGetSPodInfo

OUTBAND_SYMBOLS = (
    "dcmi_get_device_outband_channel_state",
    "dcmi_pre_reset_soc",
    "dcmi_set_device_reset",
    "dcmi_rescan_soc",
)

_ASSERTIONS = {0: Assertion.RECOVER, 1: Assertion.OCCUR, 2: Assertion.ONCE}
_NODE_DIR = re.compile(r"^node(\d+)$")


def format_code(code: int) -> str:
    """An error / event code as the reference writes it: upper-case hex of the unsigned value.

    The reference formats with strconv.FormatInt(int64(uint32), 16) + ToUpper, i.e. no `0x` and
    no zero padding ("80E01801", "1A"). A negative int (a uint read through a signed type) is
    taken modulo 2**32 so that codes above 0x7FFFFFFF never come out negative.
    """
    if code < 0:
        code &= 0xFFFFFFFF
    return f"{code:X}"


def parse_cpulist(text: str) -> set[int]:
    """Linux cpulist syntax ("0-23,48-71"); raises ValueError on anything else."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        first, last = int(lo), int(hi) if sep else int(lo)
        if first < 0 or last < first:
            raise ValueError(f"bad cpu range {part!r}")
        cpus.update(range(first, last + 1))
    return cpus


def numa_node_of(cpus: set[int], root: Path) -> int | None:
    """The NUMA node whose cpulist overlaps `cpus` most (lowest id on a tie); None if none does."""
    best: tuple[int, int] | None = None  # (overlap, -node)
    try:
        entries = list(root.iterdir())
    except OSError:
        return None
    for entry in entries:
        m = _NODE_DIR.match(entry.name)
        if m is None:
            continue
        try:
            node_cpus = parse_cpulist((entry / "cpulist").read_text())
        except (OSError, ValueError):
            continue
        overlap = len(cpus & node_cpus)
        if overlap and (best is None or (overlap, -int(m.group(1))) > best):
            best = (overlap, -int(m.group(1)))
    return None if best is None else -best[1]


def _read(fn: Callable[[], T]) -> Reading[T]:
    """One field: its value, or the library's code when the call (or the symbol) failed."""
    try:
        return Reading.ok(fn())
    except DcmiError as exc:
        return Reading.error(exc.code)


def _family(chip_name: Reading[str], board_id: Reading[int]) -> ChipFamily | None:
    if not chip_name.is_ok or not chip_name.value:
        return None
    try:
        return detect_family(chip_name.value, board_id.value if board_id.is_ok else None)
    except ValueError:
        return None


def _row(family: ChipFamily | None) -> FamilyTraits | None:
    # Which reads a chip gets is its family's row: super-pod fields (and the rack), the DDIE (the
    # reference's plugin asks the 950's alone), URMA devices (its "urma device API for A5").
    return traits(family) if family is not None else None


class DcmiBackend:
    """The `Backend` of a real node: a ctypes binding of libdcmi.so."""

    kind: str = "dcmi"
    profile: str | None = None

    def __init__(
        self,
        lib_path: str | os.PathLike[str] = DEFAULT_LIB_PATH,
        *,
        numa_root: str | os.PathLike[str] = DEFAULT_NUMA_ROOT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`lib_path`: libdcmi.so (a bare name searches LD_LIBRARY_PATH and the loader cache).
        `numa_root`: the sysfs directory with node<N>/cpulist, used to turn the chip's CPU
        affinity into a NUMA node. `clock`: seconds since the epoch, stamped on received events."""
        self._lib = DcmiLibrary(lib_path)
        self._gen: Generation = V1  # settled by init()
        self._numa_root = Path(numa_root)
        self._clock = clock
        self._sink: EventSink | None = None
        # Every callback handed to the library stays referenced for the life of the process:
        # the driver keeps the raw pointer, and calling a collected CFUNCTYPE thunk crashes.
        self._callbacks: list[object] = []
        # vNPUs created through this process, by logic id then vdev id. Listing the vNPUs that
        # exist on a chip needs dcmi_get_device_info(VDEV_MNG, ...) and the resource structs,
        # which are out of scope here, so ChipDynamic.vnpus reports this registry.
        self._vnpus: dict[int, dict[int, Vnpu]] = {}
        # (logic id, vdev id) whose activity read failed and was logged: read again every round,
        # and a vNPU the driver will not describe would otherwise log on every telemetry round.
        self._vnpu_failures: set[tuple[int, int]] = set()
        self._vnpu_mutex = threading.Lock()  # guards the two above only; never held across a call
        # (logic id, die type) whose die-id read failed and was logged: static facts are re-read,
        # and a driver without the call would otherwise log the same warning on every refresh.
        self._die_failures: set[tuple[int, DieType]] = set()
        self._die_mutex = threading.Lock()  # guards _die_failures only
        # URMA devices by logic id, kept once read: the reference reads them once per chip and never
        # again (its urmaDevInfoMap); a chip whose read failed is asked again at the next refresh.
        self._urma: dict[int, list[UrmaDevice]] = {}
        self._urma_failures: set[int] = set()  # logic ids whose failure was logged
        self._urma_mutex = threading.Lock()  # guards the two above only; never held across a call

    @property
    def library(self) -> DcmiLibrary:
        return self._lib

    @property
    def generation(self) -> Generation:
        return self._gen

    def _call(self, op: str, chip: ChipAddress, *args: Any) -> None:
        """The chip call `op` (its v1 name) in this library's generation; raises its typed error."""
        self._lib.call(self._gen.symbol(op), *self._gen.address(chip), *args)

    def _rc(self, op: str, chip: ChipAddress, *args: Any) -> int:
        return self._lib.rc(self._gen.symbol(op), *self._gen.address(chip), *args)

    # ---------------------------------------------------------------- lifecycle and inventory

    def init(self) -> None:
        """v1 first, then v2 when v1 cannot start (no `dcmi_init`, or it fails), as the reference does."""
        self._lib.open()
        try:
            self._lib.call("dcmi_init")
            self._gen = V1
        except DcmiError as v1_error:
            try:
                self._lib.call(V2.symbol("dcmi_init"))
            except DcmiError as exc:
                raise DcmiError(
                    "dcmi_init", v1_error.code, message=f"{v1_error}; and {exc}: no generation of the library starts"
                ) from exc
            self._gen = V2
        log.info("chip library initialised", extra={"api": self._gen.name})

    def version(self) -> Reading[str]:
        def read() -> str:
            buf = ctypes.create_string_buffer(VERSION_BUF)
            self._lib.call(self._gen.symbol("dcmi_get_dcmi_version"), buf, len(buf))
            return s.c_text(buf.raw)

        return _read(read)

    def discover(self) -> list[ChipAddress]:
        return self._discover_v2() if self._gen is V2 else self._discover_v1()

    def _discover_v1(self) -> list[ChipAddress]:
        num = ctypes.c_int(0)
        cards = (ctypes.c_int * MAX_CARDS)()
        self._lib.call("dcmi_get_card_list", ctypes.byref(num), cards, MAX_CARDS)
        if not 0 <= num.value <= MAX_CARDS:
            raise DcmiError("dcmi_get_card_list", message=f"invalid card count {num.value}")
        chips: list[ChipAddress] = []
        for card in cards[: num.value]:
            if card < 0:  # the reference skips invalid card ids the same way
                log.warning("library listed an invalid card id", extra={"card_id": card})
                continue
            count = ctypes.c_int(0)
            self._lib.call("dcmi_get_device_num_in_card", card, ctypes.byref(count))
            if not 0 <= count.value <= MAX_DEVICES_PER_CARD:
                raise DcmiError("dcmi_get_device_num_in_card", message=f"invalid device count {count.value}")
            for dev in range(count.value):
                logic = ctypes.c_int(-1)
                self._lib.call("dcmi_get_device_logic_id", ctypes.byref(logic), card, dev)
                phy = ctypes.c_uint(0)
                self._lib.call("dcmi_get_device_phyid_from_logicid", logic.value, ctypes.byref(phy))
                chips.append(ChipAddress(card_id=card, device_id=dev, logic_id=logic.value, phy_id=phy.value))
        return sorted(chips, key=lambda c: c.logic_id)

    def _discover_v2(self) -> list[ChipAddress]:
        """The device list is the logic ids (`DcGetDeviceList`); the phy id comes from each."""
        op = "dcmiv2_get_device_list"
        num = ctypes.c_int(0)
        ids = (ctypes.c_int * MAX_CARDS)()
        self._lib.call(op, ids, ctypes.byref(num), MAX_CARDS)  # the list first, then the count
        if not 0 <= num.value <= MAX_CARDS:
            raise DcmiError(op, message=f"invalid device count {num.value}")
        chips: list[ChipAddress] = []
        for logic in ids[: num.value]:
            if logic < 0:  # skipped like the reference skips them
                log.warning("library listed an invalid device id", extra={"logic_id": logic})
                continue
            phy = ctypes.c_uint(0)
            self._lib.call("dcmiv2_get_chip_phy_id_by_dev_id", logic, ctypes.byref(phy))
            chips.append(ChipAddress(card_id=NO_CARD, device_id=NO_CARD, logic_id=logic, phy_id=phy.value))
        return sorted(chips, key=lambda c: c.logic_id)

    # ---------------------------------------------------------------- static facts

    def read_static(self, chip: ChipAddress) -> ChipStatic:
        info = self._chip_info(chip)
        if isinstance(info, DcmiError):
            failed: Reading[str] = Reading.error(info.code)
            chip_type, chip_name, chip_version = failed, failed, failed
            aicore: Reading[int] = Reading.error(info.code)
        else:
            chip_type, chip_name, chip_version = (Reading.ok(v) for v in info[:3])
            aicore = Reading.ok(info[3])
        board_id = _read(lambda: self._board_id(chip))
        family = _family(chip_name, board_id)
        pod = self._super_pod(chip, family)
        # The DDIE exists on the v2 library only (the reference's v1 DcGetDieID refuses the type).
        row = _row(family)
        ask_ddie = row is not None and row.shm_die == "DDIE" and self._gen.by_logic_id
        return ChipStatic(
            chip_type=chip_type,
            chip_name=chip_name,
            chip_version=chip_version,
            aicore=aicore,
            board_id=board_id,
            product_type=_read(lambda: self._product_type(chip)),
            partner_card=_read(lambda: self._partner_card(chip)),
            numa_node=_read(lambda: self._numa_node(chip)),
            device_ip=_read(lambda: self._device_ip(chip)),
            main_board_id=_read(lambda: self._main_board_id(chip)),
            vdie_id=self._die_id(chip, DieType.VDIE),
            ddie_id=self._die_id(chip, DieType.DDIE) if ask_ddie else None,
            urma=self._urma_devices(chip) if row is not None and row.urma else None,
            **pod,
        )

    def _chip_info(self, chip: ChipAddress) -> tuple[str, str, str, int] | DcmiError:
        """v2, falling back to v1 on any failure like the reference does (older drivers)."""
        v2 = s.DcmiChipInfoV2()
        try:
            self._call("dcmi_get_device_chip_info_v2", chip, ctypes.byref(v2))
            return s.c_text(v2.chip_type), s.c_text(v2.chip_name), s.c_text(v2.chip_ver), int(v2.aicore_cnt)
        except DcmiError as exc:
            first = exc
        v1 = s.DcmiChipInfo()
        try:
            self._call("dcmi_get_device_chip_info", chip, ctypes.byref(v1))
        except DcmiError:
            return first  # the v2 answer says more than the fallback's
        return s.c_text(v1.chip_type), s.c_text(v1.chip_name), s.c_text(v1.chip_ver), int(v1.aicore_cnt)

    def _board_id(self, chip: ChipAddress) -> int:
        board = s.DcmiBoardInfo()
        self._call("dcmi_get_device_board_info", chip, ctypes.byref(board))
        return int(board.board_id)

    def _product_type(self, chip: ChipAddress) -> str:
        buf = ctypes.create_string_buffer(PRODUCT_TYPE_BUF)
        self._call("dcmi_get_product_type", chip, buf, len(buf))
        return s.c_text(buf.raw)

    def _partner_card(self, chip: ChipAddress) -> int:
        brother = ctypes.c_int(-1)
        self._call("dcmi_get_netdev_brother_device", chip, ctypes.byref(brother))
        return brother.value

    def _super_pod(self, chip: ChipAddress, family: ChipFamily | None) -> dict[str, Reading[int]]:
        """The ChipStatic super-pod fields; one call answers them all, so they fail together.

        Asked of A3 and 950 chips only: no other family has a super pod, and the plugin reads these
        values on those alone (the reference asks every chip and ignores the failures). Rack,
        super-pod type and size only on the 950, the one family the reference reads them of.
        """
        fields = ["super_pod_id", "server_index", "super_device_id"]
        row = _row(family)
        scope = row.super_pod if row is not None else SuperPodFields.NONE
        if scope is SuperPodFields.RACK:
            fields += ["rack_id", "super_pod_type", "scale_type"]
        if scope is SuperPodFields.NONE:
            return {}  # the fields' default: unsupported
        try:
            info = self._spod_info(chip)
        except DcmiError as exc:
            return dict.fromkeys(fields, Reading[int].error(exc.code))
        values = {
            "super_pod_id": info.super_pod_id,
            "server_index": info.server_id,
            "super_device_id": info.sdid,
            "rack_id": info.chassis_id,
            "super_pod_type": info.super_pod_type,
            "scale_type": info.scale_type,
        }
        return {name: Reading[int].ok(int(values[name])) for name in fields}

    def _spod_info(self, chip: ChipAddress) -> s.DcmiSpodInfo:
        """The chip's super-pod facts, asked the way the reference's DcGetSuperPodInfo asks."""
        unit = ctypes.c_int(-1)
        self._call("dcmi_get_device_type", chip, ctypes.byref(unit))
        if unit.value != UNIT_TYPE_NPU:
            raise NotSupported("dcmi_get_device_type", message=f"unit type {unit.value} has no super pod")
        info = s.DcmiSpodInfo()
        size = ctypes.c_uint(ctypes.sizeof(info))
        self._call(
            "dcmi_get_device_info",
            chip,
            MAIN_CMD_CHIP_INF,
            CHIP_INF_SUB_CMD_SPOD_INFO,
            ctypes.byref(info),
            ctypes.byref(size),
        )
        return info

    def _die_id(self, chip: ChipAddress, die_type: DieType) -> str | None:
        """The die id as the reference's DcGetDieID writes it; None (logged once per chip and type)
        when the library cannot answer: the chip works on without it, its consumers refuse."""
        op = "dcmi_get_device_die_v2"
        die = s.DcmiDieId()
        try:
            self._call(op, chip, int(die_type), ctypes.byref(die))
        except DcmiError as exc:
            with self._die_mutex:
                first = (chip.logic_id, die_type) not in self._die_failures
                self._die_failures.add((chip.logic_id, die_type))
            if first:
                log.warning(
                    "die id unreadable",
                    extra={"logic_id": chip.logic_id, "die_type": die_type.name, "op": exc.op, "rc": exc.code},
                )
            return None
        with self._die_mutex:
            self._die_failures.discard((chip.logic_id, die_type))
        return format_die_id(list(die.soc_die))

    def _urma_devices(self, chip: ChipAddress) -> list[UrmaDevice] | None:
        """The chip's URMA devices, read once and kept; None (logged once per chip) while unreadable."""
        with self._urma_mutex:
            known = self._urma.get(chip.logic_id)
        if known is not None:
            return known
        try:
            devices = self._read_urma(chip)
        except DcmiError as exc:
            with self._urma_mutex:
                first = chip.logic_id not in self._urma_failures
                self._urma_failures.add(chip.logic_id)
            if first:
                log.warning(
                    "urma devices unreadable",
                    extra={"logic_id": chip.logic_id, "phy_id": chip.phy_id, "op": exc.op, "rc": exc.code},
                )
            return None
        with self._urma_mutex:
            self._urma[chip.logic_id] = devices
            self._urma_failures.discard(chip.logic_id)
        return devices

    def _read_urma(self, chip: ChipAddress) -> list[UrmaDevice]:
        """As the reference's DcV2Manager.DcGetUrmaDevEidListAll: the count, then every index; an index
        that fails is skipped (logged), and a chip with devices of which none reads is an error."""
        op = "dcmi_get_urma_device_cnt"
        count = ctypes.c_uint(0)
        self._call(op, chip, ctypes.byref(count))
        if count.value > s.MAX_URMA_DEVICES:
            raise DcmiError(op, RC_INTERNAL, message=f"urma device count {count.value} above {s.MAX_URMA_DEVICES}")
        devices: list[UrmaDevice] = []
        last: DcmiError | None = None
        for index in range(count.value):
            try:
                devices.append(UrmaDevice(index=index, eids=self._urma_eids(chip, index)))
            except DcmiError as exc:
                last = exc
                log.warning(
                    "urma device skipped",
                    extra={"logic_id": chip.logic_id, "urma_index": index, "op": exc.op, "rc": exc.code},
                )
        if last is not None and not devices:
            raise last
        return devices

    def _urma_eids(self, chip: ChipAddress, index: int) -> list[str]:
        op = "dcmi_get_eid_list_by_urma_dev_index"
        infos = (s.DcmiUrmaEidInfo * s.URMA_EID_MAX_COUNT)()
        count = ctypes.c_uint(s.URMA_EID_MAX_COUNT)  # in: the room of the array
        self._call(op, chip, index, infos, ctypes.byref(count))
        if count.value > s.URMA_EID_MAX_COUNT:
            raise DcmiError(op, RC_INTERNAL, message=f"eid count {count.value} above {s.URMA_EID_MAX_COUNT}")
        # The raw bytes in order, lower-case hex: the reference's hex.EncodeToString(eid.Raw[:]).
        return [bytes(info.eid.raw).hex() for info in infos[: count.value]]

    def _main_board_id(self, chip: ChipAddress) -> int:
        value = ctypes.c_uint(0)
        self._call("dcmi_get_mainboard_id", chip, ctypes.byref(value))
        return int(value.value)

    def _numa_node(self, chip: ChipAddress) -> int:
        """The NUMA node of the chip's affine CPUs (the library reports CPUs, sysfs maps them)."""
        op = "dcmi_get_affinity_cpu_info_by_device_id"
        buf = ctypes.create_string_buffer(AFFINITY_BUF)
        length = ctypes.c_int(0)
        self._call(op, chip, buf, ctypes.byref(length))
        raw = buf.raw[: length.value] if 0 < length.value <= AFFINITY_BUF else buf.raw
        try:
            cpus = parse_cpulist(s.c_text(raw))
        except ValueError:
            raise NotSupported(op, message=f"unparsable CPU affinity {s.c_text(raw)!r}") from None
        node = numa_node_of(cpus, self._numa_root) if cpus else None
        if node is None:
            raise NotSupported(op, message=f"no NUMA node under {self._numa_root} holds CPUs {s.c_text(raw)!r}")
        return node

    def _device_ip(self, chip: ChipAddress) -> str:
        ip, mask = s.DcmiIpAddr(), s.DcmiIpAddr()
        ip.ip_type = s.IP_TYPE_V4  # an input too: the reference asks for v4 unless it wants v6
        self._call("dcmi_get_device_ip", chip, PORT_TYPE_ROCE, 0, ctypes.byref(ip), ctypes.byref(mask))
        if ip.ip_type == s.IP_TYPE_V6:
            return str(ipaddress.IPv6Address(bytes(ip.u_addr.ip6)))
        return str(ipaddress.IPv4Address(bytes(ip.u_addr.ip4)))

    # ---------------------------------------------------------------- dynamic state

    def read_dynamic(self, chip: ChipAddress) -> ChipDynamic:
        # Health first: after a card drop the other calls may hang, and "not ready" here is the
        # card-drop signal that the caller turns into the synthetic code.
        health = self._health(chip)
        return ChipDynamic(
            health=health,
            error_codes=_read(lambda: self._error_codes(chip)),
            network_health=_read(lambda: self._int_out("dcmi_get_device_network_health", chip)),
            hbm=_read(lambda: self._hbm(chip)),
            temperature_c=_read(lambda: self._int_out("dcmi_get_device_temperature", chip)),
            power_w=_read(lambda: self._power(chip)),
            utilization=self._utilization(chip),
            processes=_read(lambda: self._processes(chip)),
            boot_status=_read(lambda: self._int_out("dcmi_get_device_boot_status", chip)),
            vnpus=Reading.ok(self._registered_vnpus(chip)),
        )

    def _health(self, chip: ChipAddress) -> Reading[int]:
        op = "dcmi_get_device_health"
        value = ctypes.c_uint(0)
        try:
            rc = self._rc(op, chip, ctypes.byref(value))
        except NotSupported as exc:  # the symbol is missing, or the generation has no such call
            return Reading.error(exc.code)
        if rc == RC_NOT_READY:
            raise CardDropped(op, rc, message=f"chip {chip.logic_id} is not ready: its card dropped")
        if rc != 0:
            return Reading.error(rc)
        return Reading.ok(int(value.value))

    def _int_out(self, op: str, chip: ChipAddress) -> int:
        value = ctypes.c_int(0)
        self._call(op, chip, ctypes.byref(value))
        return value.value

    def _error_codes(self, chip: ChipAddress) -> list[str]:
        op = "dcmi_get_device_errorcode_v2"
        count = ctypes.c_int(0)
        codes = (ctypes.c_uint * s.MAX_ERROR_CODES)()
        self._call(op, chip, ctypes.byref(count), codes, s.MAX_ERROR_CODES)
        if not 0 <= count.value <= s.MAX_ERROR_CODES:
            raise DcmiError(op, RC_INTERNAL, message=f"invalid error code count {count.value}")
        # The reference drops zero entries too: a zero is an empty slot, never a code.
        return [format_code(code) for code in codes[: count.value] if code != 0]

    def _hbm(self, chip: ChipAddress) -> Hbm:
        info = s.DcmiHbmInfo()
        self._call("dcmi_get_device_hbm_info", chip, ctypes.byref(info))
        return Hbm(
            total_mb=int(info.memory_size),
            used_mb=int(info.memory_usage),
            frequency_mhz=int(info.freq),
            temperature_c=int(info.temp),
            bandwidth_util_pct=int(info.bandwith_util_rate),
        )

    def _power(self, chip: ChipAddress) -> float:
        op = "dcmi_get_device_power_info"
        tenths = self._int_out(op, chip)
        if tenths < 0:  # the reference rejects negative power the same way
            raise DcmiError(op, RC_INTERNAL, message=f"invalid power {tenths}")
        return tenths / 10.0

    def _utilization(self, chip: ChipAddress) -> Reading[Utilization]:
        """AI Core and HBM utilization; one unsupported half leaves the other (None = unread)."""
        values: dict[int, int | None] = {}
        first_error: DcmiError | None = None
        op = "dcmi_get_device_utilization_rate"
        for kind in (UTIL_AICORE, UTIL_HBM):
            rate = ctypes.c_uint(0)
            try:
                self._call(op, chip, kind, ctypes.byref(rate))
                values[kind] = int(rate.value)
            except DcmiError as exc:
                values[kind] = None
                first_error = first_error or exc
        if first_error is not None and all(v is None for v in values.values()):
            return Reading.error(first_error.code)
        return Reading.ok(Utilization(aicore_pct=values[UTIL_AICORE], hbm_pct=values[UTIL_HBM]))

    def _processes(self, chip: ChipAddress) -> list[ChipProcess]:
        op = "dcmi_get_device_resource_info"
        procs = (s.DcmiProcMemInfo * s.MAX_PROCS)()
        num = ctypes.c_int(0)
        self._call(op, chip, procs, ctypes.byref(num))
        if not 0 <= num.value <= s.MAX_PROCS:
            raise DcmiError(op, RC_INTERNAL, message=f"invalid process count {num.value}")
        return [ChipProcess(pid=p.proc_id, memory_bytes=int(p.proc_mem_usage)) for p in procs[: num.value]]

    def _registered_vnpus(self, chip: ChipAddress) -> list[Vnpu]:
        with self._vnpu_mutex:
            return sorted(self._vnpus.get(chip.logic_id, {}).values(), key=lambda v: v.vdev_id)

    # ---------------------------------------------------------------- fault events

    def subscribe(self, sink: EventSink) -> bool:
        op = self._gen.symbol("dcmi_subscribe_fault_event")
        if not self._lib.has(op):
            return False
        self._sink = sink
        callback = s.FaultEventCallback(self._on_event)
        self._callbacks.append(callback)
        try:
            # card = dev = -1 (v2: dev -1): every chip; an all-zero filter: every event (as the reference).
            rc = self._lib.rc(op, *self._gen.every_chip(), s.DcmiEventFilter(), callback)
        except DcmiError as exc:
            rc = exc.code
        if rc != 0:
            # The exporter falls back to polling the error codes, as the reference does.
            log.warning("fault-event subscription failed", extra={"error": str(error_for(op, rc))})
            return False
        return True

    def _on_event(self, event: ctypes._Pointer[s.DcmiEvent]) -> None:
        """Runs on the driver's thread; must never raise back into C."""
        try:
            ev = event.contents
            if ev.type != s.EVENT_TYPE_FAULT:
                return
            fault = ev.event_t.dms_event
            assertion = _ASSERTIONS.get(int(fault.assertion))
            if assertion is None:
                log.warning("fault event with unknown assertion dropped", extra={"assertion": int(fault.assertion)})
                return
            raw = RawFaultEvent(
                logic_id=int(fault.deviceid),
                code=format_code(int(fault.event_id)),
                severity=int(fault.severity),
                assertion=assertion,
                # Host receive time, not alarm_raised_time: like the reference, because a recover
                # event carries the time its fault occurred (and in seconds), which would make
                # every fault look as if it had lasted no time at all.
                raised_at_ms=int(self._clock() * 1000),
                name=s.c_text(fault.event_name),
            )
            sink = self._sink
            if sink is not None:
                sink(raw)
        except BaseException:
            log.exception("fault-event callback failed; event dropped")

    # ---------------------------------------------------------------- reset

    def outband_supported(self, chip: ChipAddress) -> bool:
        if not all(self._lib.has(self._gen.symbol(name)) for name in OUTBAND_SYMBOLS):
            return False
        try:
            return self._int_out("dcmi_get_device_outband_channel_state", chip) == OUTBAND_READY
        except DcmiError:
            return False

    def reset(self, chip: ChipAddress, channel: ResetChannel) -> None:
        if channel is ResetChannel.INBAND:
            self._call("dcmi_set_device_reset", chip, INBAND_CHANNEL)
            return
        # Out of band, in the reference's order: channel ready, pre-reset, reset, rescan.
        state = self._int_out("dcmi_get_device_outband_channel_state", chip)
        if state != OUTBAND_READY:
            raise NotSupported(
                "dcmi_get_device_outband_channel_state", message=f"out-of-band channel not ready (state {state})"
            )
        self._call("dcmi_pre_reset_soc", chip)
        self._call("dcmi_set_device_reset", chip, OUTBAND_CHANNEL)
        self._call("dcmi_rescan_soc", chip)

    def boot_status(self, chip: ChipAddress) -> int:
        return self._int_out("dcmi_get_device_boot_status", chip)

    # ---------------------------------------------------------------- vNPU

    def create_vnpu(self, chip: ChipAddress, template: str, vdev_id: int | None, vfg_id: int | None) -> Vnpu:
        op = "dcmi_create_vdevice"
        self._gen.symbol(op)  # NotSupported on v2 before anything else is checked
        known = TEMPLATES.get(template)
        if known is None:
            raise BadParameter(op, message=f"unknown vNPU template {template!r}")
        name = template.encode("ascii")
        if len(name) >= s.TEMPLATE_NAME_LEN:  # keep the NUL the library looks for
            raise BadParameter(op, message=f"template name {template!r} too long")
        for label, value in (("vdev_id", vdev_id), ("vfg_id", vfg_id)):
            if value is not None and not 0 <= value < ANY_ID:
                raise BadParameter(op, message=f"{label} {value} out of range")
        request = s.DcmiCreateVdevResStru(
            vdev_id=ANY_ID if vdev_id is None else vdev_id,
            vfg_id=ANY_ID if vfg_id is None else vfg_id,
            template_name=name,
        )
        out = s.DcmiCreateVdevOut()
        self._call(op, chip, ctypes.byref(request), ctypes.byref(out))
        vnpu = Vnpu(
            vdev_id=int(out.vdev_id),
            vfg_id=int(out.vfg_id),
            template=template,
            suffix=known.suffix,
            aicore=known.aicore,
        )
        with self._vnpu_mutex:
            self._vnpus.setdefault(chip.logic_id, {})[vnpu.vdev_id] = vnpu
        return vnpu

    def destroy_vnpu(self, chip: ChipAddress, vdev_id: int) -> None:
        self._call("dcmi_set_destroy_vdevice", chip, vdev_id)
        with self._vnpu_mutex:
            self._vnpus.get(chip.logic_id, {}).pop(vdev_id, None)
            self._vnpu_failures.discard((chip.logic_id, vdev_id))

    def close(self) -> None:
        # Late events are dropped from now on. The library is not unloaded and the callbacks stay
        # referenced: a driver thread may still hold the callback pointer, and there is no
        # unsubscribe call to make it let go.
        self._sink = None

    # ---------------------------------------------------------------- A3 die policy

    def set_multi_die_policy(self, policy: int) -> None:
        """`dcmi_set_multi_die_policy` (the reference's DcSetMultiDiePolicy): 0 a chip's dies go into
        a container together, 1 one die may go alone. A v1 call (the A3's library); NotSupported
        on a v2 library and when the symbol is missing."""
        op = "dcmi_set_multi_die_policy"
        if self._gen.by_logic_id:
            raise NotSupported(op, message=f"{op} has no dcmiv2 counterpart")
        self._lib.call(op, policy)

    # ---------------------------------------------------------------- metrics (npu-exporter parity)

    def read_telemetry(self, chip: ChipAddress) -> ChipTelemetry:
        """The slow reads behind the extra metric families, each field on its own: a call the
        driver lacks or refuses leaves that field None (npu-exporter drops the series then)."""
        vector, cube, overall = self._multi_utilization(chip)
        return ChipTelemetry(
            voltage_v=_value(lambda: self._voltage(chip)),
            aicore_freq_mhz=_value(lambda: self._aicore_frequency(chip)),
            vector_pct=vector,
            cube_pct=cube,
            overall_pct=overall,
            hbm_ecc=_value(lambda: self._hbm_ecc(chip)),
            pcie=_value(lambda: self._pcie_bandwidth(chip)),
            hccs=_value(lambda: self._hccs_stats(chip)),
            hccs_bandwidth=_value(lambda: self._hccs_bandwidth(chip)),
            sio_crc_err=_value(lambda: self._sio(chip)),
            memory=_value(lambda: self._memory(chip)),
            serial_number=_value(lambda: self._serial_number(chip)) or "NA",
            vnpus=self._vnpu_activity(chip),
        )

    def _vnpu_activity(self, chip: ChipAddress) -> tuple[VnpuActivity, ...]:
        """The activity of each vNPU of the chip (from this process's registry, see __init__), as
        npu-exporter's DcVGetDeviceInfo reads it: the resource query for its AI cores, then the
        activity query. A vNPU whose read fails is left out, logged once until it reads again."""
        out: list[VnpuActivity] = []
        for vnpu in self._registered_vnpus(chip):
            if not valid_vdev_id(vnpu.vdev_id):
                continue  # the reference asks no query of such an id
            key = (chip.logic_id, vnpu.vdev_id)
            try:
                activity = self._read_vnpu(chip, vnpu.vdev_id)
            except DcmiError as exc:
                with self._vnpu_mutex:
                    first = key not in self._vnpu_failures
                    self._vnpu_failures.add(key)
                if first:
                    log.warning(
                        "vNPU activity unreadable; its vnpu_pod_* series are dropped until it reads again",
                        extra={"logic_id": chip.logic_id, "vdev_id": vnpu.vdev_id, "error": str(exc)},
                    )
                continue
            with self._vnpu_mutex:
                recovered = key in self._vnpu_failures
                self._vnpu_failures.discard(key)
            if recovered:
                log.info("vNPU activity readable again", extra={"logic_id": chip.logic_id, "vdev_id": vnpu.vdev_id})
            out.append(activity)
        return tuple(out)

    def _read_vnpu(self, chip: ChipAddress, vdev_id: int) -> VnpuActivity:
        resource = s.DcmiVdevQueryStru(vdev_id=vdev_id)
        self._device_info(chip, MAIN_CMD_VDEV_MNG, VMNG_SUB_CMD_GET_VDEV_RESOURCE, resource)
        activity = s.DcmiVdevQueryStru(vdev_id=vdev_id)
        self._device_info(chip, MAIN_CMD_VDEV_MNG, VMNG_SUB_CMD_GET_VDEV_ACTIVITY, activity)
        computing = activity.query_info.computing
        total, free = int(computing.vdev_memory_total), int(computing.vdev_memory_free)
        if free > total:  # the reference subtracts unsigned and serves the wrapped number
            raise DcmiError("dcmi_get_device_info", RC_INTERNAL, message=f"vNPU free memory {free} above total {total}")
        return VnpuActivity(
            vdev_id=vdev_id,
            aicore=float(resource.query_info.computing.aic),
            aicore_pct=int(computing.vdev_aicore_utilization),
            total_memory=total,
            used_memory=total - free,
        )

    def _uint_out(self, op: str, chip: ChipAddress, *args: Any) -> int:
        value = ctypes.c_uint(0)
        self._call(op, chip, *args, ctypes.byref(value))
        return int(value.value)

    def _voltage(self, chip: ChipAddress) -> float:
        op = "dcmi_get_device_voltage"
        hundredths = self._uint_out(op, chip)
        if hundredths >= INT32_LIMIT:  # the reference's IsGreaterThanOrEqualInt32: a bogus read
            raise DcmiError(op, RC_INTERNAL, message=f"invalid voltage {hundredths}")
        return hundredths / 100.0

    def _aicore_frequency(self, chip: ChipAddress) -> int:
        op = "dcmi_get_device_frequency"
        mhz = self._uint_out(op, chip, FREQ_AICORE_CURRENT)
        if mhz >= INT32_LIMIT:
            raise DcmiError(op, RC_INTERNAL, message=f"invalid frequency {mhz}")
        return mhz

    def _multi_utilization(self, chip: ChipAddress) -> tuple[int | None, int | None, int | None]:
        """(vector, cube, overall) %: the multi-utilization call when the driver has it (the only
        source of cube), else the v1 call's vector (12) and overall (13), as collectUtilV1."""
        info = s.DcmiMultiUtilizationInfo()
        try:
            self._call("dcmi_get_device_multi_utilization_rate", chip, ctypes.byref(info))
            return int(info.aiv_util), int(info.aic_util), int(info.npu_util)
        except DcmiError:
            pass
        op = "dcmi_get_device_utilization_rate"
        vector = _value(lambda: self._uint_out(op, chip, UTIL_VECTOR))
        overall = _value(lambda: self._uint_out(op, chip, UTIL_OVERALL))
        return vector, None, overall

    def _hbm_ecc(self, chip: ChipAddress) -> HbmEcc:
        info = s.DcmiEccInfo()
        self._call("dcmi_get_device_ecc_info", chip, DEVICE_TYPE_HBM, ctypes.byref(info))
        return HbmEcc(
            enable_flag=int(info.enable_flag),
            single_bit_error_cnt=int(info.single_bit_error_cnt),
            double_bit_error_cnt=int(info.double_bit_error_cnt),
            total_single_bit_error_cnt=int(info.total_single_bit_error_cnt),
            total_double_bit_error_cnt=int(info.total_double_bit_error_cnt),
            single_bit_isolated_pages_cnt=int(info.single_bit_isolated_pages_cnt),
            double_bit_isolated_pages_cnt=int(info.double_bit_isolated_pages_cnt),
        )

    def _pcie_bandwidth(self, chip: ChipAddress) -> PcieBandwidth:
        info = s.DcmiPcieLinkBandwidthInfo(profiling_time=PCIE_PROFILING_MS)
        self._call("dcmi_get_pcie_link_bandwidth_info", chip, ctypes.byref(info))
        # Each array is (min, max, avg), the reference's convertPcieBw.
        rates = {kind: tuple(int(v) for v in getattr(info, f"{kind}_bw")) for kind in PCIE_KINDS}
        return PcieBandwidth(rates={k: (v[0], v[1], v[2]) for k, v in rates.items()})

    def _device_info(self, chip: ChipAddress, main_cmd: int, sub_cmd: int, info: ctypes.Structure) -> None:
        size = ctypes.c_uint(ctypes.sizeof(info))
        self._call("dcmi_get_device_info", chip, main_cmd, sub_cmd, ctypes.byref(info), ctypes.byref(size))

    def _hccs_stats(self, chip: ChipAddress) -> HccsStats:
        """The 64-bit counters when the driver has them, else the 32-bit ones (npu-exporter's PreCollect
        order); npu-exporter reads the first HCCS_PORTS ports of the library's 16."""
        info: s.DcmiHccsStatisticInfoU64 | s.DcmiHccsStatisticInfo = s.DcmiHccsStatisticInfoU64()
        try:
            self._device_info(chip, MAIN_CMD_HCCS, HCCS_SUB_CMD_STATISTIC_U64, info)
        except DcmiError:
            info = s.DcmiHccsStatisticInfo()
            self._device_info(chip, MAIN_CMD_HCCS, HCCS_SUB_CMD_STATISTIC, info)
        return HccsStats(
            tx_cnt=tuple(int(v) for v in info.tx_cnt[:HCCS_PORTS]),
            rx_cnt=tuple(int(v) for v in info.rx_cnt[:HCCS_PORTS]),
            crc_err_cnt=tuple(int(v) for v in info.crc_err_cnt[:HCCS_PORTS]),
        )

    def _hccs_bandwidth(self, chip: ChipAddress) -> HccsBandwidth:
        info = s.DcmiHccsBandwidthInfo(profiling_time=HCCS_PROFILING_MS)
        self._call("dcmi_get_hccs_link_bandwidth_info", chip, ctypes.byref(info))
        return HccsBandwidth(
            profiling_time_ms=int(info.profiling_time),
            total_tx=float(info.total_txbw),
            total_rx=float(info.total_rxbw),
            tx=tuple(float(v) for v in info.tx_bandwidth[:HCCS_PORTS]),
            rx=tuple(float(v) for v in info.rx_bandwidth[:HCCS_PORTS]),
        )

    def _sio(self, chip: ChipAddress) -> tuple[int, int]:
        info = s.DcmiSioCrcErrStatisticInfo()
        self._device_info(chip, MAIN_CMD_SIO, SIO_SUB_CMD_CRC_ERR, info)
        return int(info.tx_error_count), int(info.rx_error_count)

    def _memory(self, chip: ChipAddress) -> Memory:
        op = "dcmi_get_device_memory_info_v3"
        info = s.DcmiMemoryInfo()
        self._call(op, chip, ctypes.byref(info))
        if info.memory_size < info.memory_available:  # the reference refuses such a read too
            raise DcmiError(op, RC_INTERNAL, message="total memory below available memory")
        return Memory(total_mb=int(info.memory_size), available_mb=int(info.memory_available))

    def _serial_number(self, chip: ChipAddress) -> str:
        """By the chip's card on a v1 driver (dcmi_get_card_elabel_v2), by its logic id on v2."""
        info = s.DcmiElabelInfo()
        if self._gen.by_logic_id:
            self._lib.call("dcmiv2_get_device_elabel_info", chip.logic_id, ctypes.byref(info))
        else:
            self._lib.call("dcmi_get_card_elabel_v2", chip.card_id, ctypes.byref(info))
        return bytes(info.serial_number).split(b"\0", 1)[0].decode(errors="replace")


INT32_LIMIT = 2**31 - 1
MAIN_CMD_HCCS = 16  # enum dcmi_main_cmd DCMI_MAIN_CMD_HCCS (the reference's MainCmdHccs)
MAIN_CMD_SIO = 56  # DCMI_MAIN_CMD_SIO
MAIN_CMD_VDEV_MNG = 52  # DCMI_MAIN_CMD_VDEV_MNG (the reference's MainCmdVDevMng)
VMNG_SUB_CMD_GET_VDEV_RESOURCE = 0  # the reference's VmngSubCmdGetVDevResource
VMNG_SUB_CMD_GET_VDEV_ACTIVITY = 5  # VmngSubCmdGetVDevActivity
HCCS_SUB_CMD_STATISTIC = 3  # the reference's HccsSubCmdGetStatisticInfo (u32 counters)
HCCS_SUB_CMD_STATISTIC_U64 = 5  # HccsSubCmdGetStatisticInfoU64
SIO_SUB_CMD_CRC_ERR = 0  # SioSubCmdCrcErrStatistics
HCCS_PROFILING_MS = 200  # npu-exporter's default -hccsBWProfilingTime
FREQ_AICORE_CURRENT = 7  # enum dcmi_freq_type DCMI_FREQ_AICORE_CURRENT_
UTIL_VECTOR = 12  # dcmi_get_device_utilization_rate input types (the reference's VectorCore, Overall)
UTIL_OVERALL = 13
DEVICE_TYPE_HBM = 2  # enum dcmi_device_type DCMI_DEVICE_TYPE_HBM
PCIE_PROFILING_MS = 200  # npu-exporter's default -profilingTime


def _value(fn: Callable[[], T]) -> T | None:
    """One telemetry field: its value, or None when the call (or the symbol) failed."""
    try:
        return fn()
    except DcmiError:
        return None
