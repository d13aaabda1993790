"""Huawei's `hccn_tool`: network traffic counters for hung-job detection, the 950's ports that
are down, for the UB/UBoE codes, and the 910's RoCE link state, for its lost link-down events.

The reference runs the tool (devmanager/hccn/hccn_tool.go) with a minimal environment and a
1 MiB cap on its output. We run it as an asyncio subprocess in a session of its own, outside the
DCMI call pool, at most two at a time, and kill its whole process group after a timeout without
waiting for pipes a leftover child may hold: a stuck tool costs one round's reading of one chip,
nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ascend_common.chip_traits import Network, families_with
from ascend_common.goconv import atoi
from ascend_common.schemas.exporter import Chip, UbPorts

from dcmi_exporter.backends.base import (
    OPTICAL_INDEX_KEY,
    UbPortLink,
    UbPortOptical,
    UbPortStat,
    optical_port_values,
    ub_port_stat,
)
from dcmi_exporter.backends.failing import FailingChips

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 1024 * 1024  # the reference's limitSize
STDERR_KEPT = 4096  # enough for an error message in a log line
TIMEOUT_S = 10.0
REAP_S = 1.0  # after SIGKILL, how long a run waits for the kernel to report the tool's exit
CONCURRENCY = 2
ROCE_TX, ROCE_RX = "roce_tx_all_pkt_num", "roce_rx_all_pkt_num"
UB_TX, UB_RX = "tx_busi_flit_num", "rx_busi_flit_num"
_NOT_A_NUMBER = ("NA", "not supported")
UINT64_MAX = 2**64 - 1
_UINT64_DIGITS = len(str(UINT64_MAX))
_INTEGER = re.compile(r"[+-]?[0-9]+")
LINK_DOWN, LINK_UP = "DOWN", "UP"
LINK_STATUS_PARTS = 3  # "link status: DOWN"
BONDING_PORT, UB_PORT = "ETH", "UB"  # the PortType column
PORT_ENABLE_KEY, PORT_ENABLE_ON = "port_enable", "on"
# A -dev_info table longer than this is no 950's (its ports number in the tens; the simulator and its
# API take port ids 0..63): it is refused, since every row costs a tool run per chip per round.
MAX_PORT_ROWS = 64
PORT_TABLE_TTL_S = 300.0  # hang detection re-reads the 950's port table at least this often
UB_DIES = (0, 1)  # the udies the reference's UB and network collectors ask, in this order


class HccnError(Exception):
    """The tool could not be run, failed, hung, or printed what we cannot read."""


# ---------------------------------------------------------------------- parsers


def _stat_lines(text: str) -> Iterator[tuple[str, str]]:
    """`key:value` lines, neither side trimmed, as `GetNPUStatInfo` reads them; a line that is not
    exactly one `:` and a value is skipped."""
    for line in text.split("\n"):
        parts = line.split(":")
        if len(parts) == 2 and parts[1] != "":
            yield parts[0], parts[1]


def parse_stat(text: str) -> dict[str, int]:
    """`hccn_tool -i <phy> -stat -g`: the `_stat_lines` whose value is a number (Go's Atoi)."""
    return {key: value for key, text in _stat_lines(text) if (value := atoi(text)) is not None}


def parse_counters(text: str) -> tuple[dict[str, int], dict[str, str]]:
    """`hccn_tool -i <phy> -stat -g` read as unsigned 64-bit counters: (the counters in range, the
    keys whose value is a number outside 0..2**64-1 with that value). A negative or oversized
    counter is a tool's or driver's fault, not traffic: shown, it would read as -9.2e18 packets."""
    counters: dict[str, int] = {}
    out_of_range: dict[str, str] = {}
    for key, value in _stat_lines(text):
        if not _INTEGER.fullmatch(value):
            continue
        # A number too long for any uint64 is out of range without converting it.
        number = int(value) if len(value) <= _UINT64_DIGITS + 1 else None
        if number is not None and 0 <= number <= UINT64_MAX:
            counters[key] = number
        else:
            out_of_range[key] = value[: _UINT64_DIGITS + 2]
    return counters, out_of_range


def roce_traffic(stat: Mapping[str, int]) -> tuple[int, int]:
    """(tx, rx) packets of a `-stat -g` output. The reference reads a missing counter as 0, which
    a round later looks like traffic; for us the output is unreadable."""
    try:
        return stat[ROCE_TX], stat[ROCE_RX]
    except KeyError as exc:
        raise HccnError(f"no {exc.args[0]} in the -stat output") from None


def _first_table(text: str) -> Iterator[tuple[int, str]]:
    """The `|` rows of a `-dev_info` output's first table, each with the number of `+-` separators
    above it (1: the header's section, 2: the data rows'); the third separator ends the table. More
    than MAX_PORT_ROWS data rows is an HccnError."""
    separators = rows = 0
    for line in text.split("\n"):
        row = line.strip()
        if row.startswith("+-"):
            separators += 1
            if separators == 3:
                return
        elif separators and row.startswith("|"):
            rows += separators == 2
            if rows > MAX_PORT_ROWS:
                raise HccnError(f"-dev_info table of more than {MAX_PORT_ROWS} rows: not a 950's port table")
            yield separators, row


def _columns(row: str) -> list[str]:
    return [c.strip() for c in row.removeprefix("|").removesuffix("|").split("|")]


@dataclass(frozen=True)
class PortRow:
    udie: int
    port: int
    port_type: str
    link_status: str


def parse_dev_info_rows(text: str) -> list[PortRow]:
    """`hccn_tool -g -dev_info -i <logic>` (950): the first table's data rows (`parseDeviceTable`:
    rows between its second and third `+-` separator; a row needs at least 5 columns with a port
    type and link status, and integer udie and port ids; another row is skipped)."""
    rows: list[PortRow] = []
    for section, row in _first_table(text):
        if section != 2:
            continue
        columns = _columns(row)
        if len(columns) < 5 or not columns[3] or not columns[4]:
            log.warning("hccn_tool -dev_info: row skipped", extra={"row": row})
            continue
        udie, port = atoi(columns[0]), atoi(columns[1])
        if udie is None or port is None:
            log.warning("hccn_tool -dev_info: row skipped", extra={"row": row})
            continue
        rows.append(PortRow(udie, port, columns[3], columns[4]))
    if not rows:
        raise HccnError("no port rows in the -dev_info output")
    return rows


def parse_dev_info(text: str) -> dict[int, list[int]]:
    """`parse_dev_info_rows` as udie id -> port ids, in the table's order."""
    out: dict[int, list[int]] = {}
    for row in parse_dev_info_rows(text):
        out.setdefault(row.udie, []).append(row.port)
    return out


def parse_port_table(text: str) -> list[PortRow]:
    """`hccn_tool -g -dev_info -i <logic>` as `getAllUBPortsFromHccnLines` reads it for the port
    snapshot: the first table's rows that mention up or down; one bad such row fails the whole
    table (unlike `parse_dev_info`, which skips it), since a miscount would raise or clear codes."""
    rows: list[PortRow] = []
    for _, row in _first_table(text):
        lower = row.lower()
        if LINK_DOWN.lower() not in lower and LINK_UP.lower() not in lower:
            continue  # the header
        columns = _columns(row)
        if len(columns) < 5 or not columns[3] or not columns[4]:
            raise HccnError(f"-dev_info row with missing columns: {row!r}")
        udie, port = atoi(columns[0]), atoi(columns[1])
        if udie is None or port is None:
            raise HccnError(f"-dev_info row with a bad udie or port id: {row!r}")
        rows.append(PortRow(udie, port, columns[3], columns[4]))
    return rows


def parse_port_info(text: str) -> dict[str, str]:
    """`hccn_tool -g -port_info -i <logic> -u <udie> -p <port>`: `key : value` lines, trimmed
    (`GetUBPortInfo`)."""
    return parse_ub_stat(text)


def count_down(rows: list[PortRow], wired: Callable[[PortRow], bool]) -> UbPorts:
    """`GetUBPortsDownSnapshot`: DOWN rows by type; a UB port counts only when wired."""
    ub = bonding = 0
    for row in rows:
        if row.link_status != LINK_DOWN:
            continue
        if row.port_type == BONDING_PORT:
            bonding += 1
        elif row.port_type == UB_PORT and wired(row):
            ub += 1
    return UbPorts(ub_down=ub, bonding_down=bonding)


def parse_ub_stat(text: str) -> dict[str, str]:
    """`hccn_tool -g -stat -i <logic> -u <udie> -p <port>` (950): `key : value` lines, trimmed
    (`GetNPUUbStatInfo`)."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        parts = line.split(":")
        if len(parts) == 2:
            out[parts[0].strip()] = parts[1].strip()
    return out


def ub_counter(value: str | None) -> int:
    """A flit counter as `collectUBTraffic` adds it: NA, "not supported", missing, unparsable or
    <= 0 adds nothing."""
    if not value or any(bad in value for bad in _NOT_A_NUMBER):
        return 0
    number = atoi(value)
    return number if number is not None and number > 0 else 0


def parse_link_status(text: str) -> str:
    """`hccn_tool -i <phy> -link -g`: `link status: DOWN` gives "DOWN". As `GetNPULinkStatus`: newlines
    removed, split on single spaces, exactly three parts, the third; anything else is unreadable."""
    parts = text.replace("\n", "").split(" ")
    if len(parts) != LINK_STATUS_PARTS:
        raise HccnError(f"-link output is not 'link status: <state>': {text[:200]!r}")
    return parts[2]


# ---------------------------------------------------------------------- the runner


class _Capture(asyncio.SubprocessProtocol):
    """What one run printed (stdout capped, stderr kept short) and whether it is over: the tool
    exited, and every process holding its pipes closed them."""

    def __init__(self) -> None:
        self.out, self.err = bytearray(), bytearray()
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        # The rest is dropped, never left in the pipe, so the tool never blocks on a full pipe.
        kept, limit = (self.out, OUTPUT_LIMIT) if fd == 1 else (self.err, STDERR_KEPT)
        if len(kept) < limit:
            kept += data[: limit - len(kept)]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open:
            self.closed.set()

    def process_exited(self) -> None:
        self.exited.set()


class HccnTool:
    """Runs `hccn_tool`: env PATH and LD_LIBRARY_PATH only, stdout capped, in a session of its own;
    after `timeout_s` (or when its caller gives up) the whole process group is killed, our ends of
    its pipes closed, and its exit awaited at most `REAP_S`. A run therefore holds its slot for at
    most `timeout_s + REAP_S`, whatever the tool or the processes it started do."""

    def __init__(self, path: Path, timeout_s: float = TIMEOUT_S, concurrency: int = CONCURRENCY) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._slots = asyncio.Semaphore(concurrency)

    async def run(self, *args: str) -> str:
        async with self._slots:
            return await self._run(args)

    async def _run(self, args: tuple[str, ...]) -> str:
        env = {name: os.environ.get(name, "") for name in ("PATH", "LD_LIBRARY_PATH")}
        loop = asyncio.get_running_loop()
        try:
            transport, capture = await loop.subprocess_exec(
                _Capture,
                self.path,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                # A group of its own: what the tool leaves behind (a child holding its stdout) dies with it.
                start_new_session=True,
            )
        except OSError as exc:
            raise HccnError(f"cannot run {self.path}: {exc}") from None
        command = f"{self.path} {' '.join(args)}".strip()
        try:
            async with asyncio.timeout(self.timeout_s):
                await capture.exited.wait()
                await capture.closed.wait()
        except TimeoutError:
            raise HccnError(f"{command}: no answer in {self.timeout_s:g} s, its process group killed") from None
        finally:
            await _end(transport, capture, command)
        rc = transport.get_returncode()
        if rc != 0:
            message = capture.err.decode(errors="replace").strip() or capture.out[:200].decode(errors="replace").strip()
            raise HccnError(f"{command}: exit {rc}: {message}")
        return capture.out.decode(errors="replace")


async def _end(transport: asyncio.SubprocessTransport, capture: _Capture, command: str) -> None:
    """Leave nothing of a run behind, within REAP_S."""
    if not (capture.exited.is_set() and capture.closed.is_set()):
        # The tool, or something it started, still runs or holds a pipe. Its pid is its group's id (a
        # session of its own), and stays that group's while any member lives.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(transport.get_pid(), signal.SIGKILL)
    transport.close()  # our ends of the pipes: a holder that left the group cannot keep us reading
    if capture.exited.is_set():
        return
    try:
        async with asyncio.timeout(REAP_S):
            await capture.exited.wait()
    except TimeoutError:
        # Unkillable (a wait in the kernel): the child watcher reaps it whenever it goes; the slot is free now.
        log.error("hccn_tool did not exit after SIGKILL; left to the reaper", extra={"command": command})


class PortTable:
    """The 950's port table (`-g -dev_info`: udie -> port ids) of the first chip that answers, shared
    by every chip (the reference's getNpuDevNetPortInfos, which reads it once for good); ours is read
    again after `ttl_s`, and at once after `forget` (a round in which none of its ports answered), so
    a table that changed (ports reconfigured, a driver upgrade) is picked up."""

    def __init__(self, tool: HccnTool, ttl_s: float = PORT_TABLE_TTL_S) -> None:
        self.tool = tool
        self.ttl_s = ttl_s
        self._ports: dict[int, list[int]] | None = None
        self.kinds: dict[tuple[int, int], str] = {}  # (udie, port) -> PortType ("UB", "ETH")
        self._at = 0.0  # loop time of its read

    async def get(self, logic: int) -> dict[int, list[int]]:
        now = asyncio.get_running_loop().time()
        if self._ports is None or now - self._at >= self.ttl_s:
            rows = parse_dev_info_rows(await self.tool.run("-g", "-dev_info", "-i", str(logic)))
            ports: dict[int, list[int]] = {}
            for row in rows:
                ports.setdefault(row.udie, []).append(row.port)
            if ports != self._ports:
                log.info("950 port table read", extra={"logic_id": logic, "ports": ports})
            self._ports, self._at = ports, now
            self.kinds = {(row.udie, row.port): row.port_type for row in rows}
        return self._ports

    def forget(self) -> None:
        self._ports = None


class HccnTraffic:
    """(tx, rx) of a chip, or None when the tool cannot tell this round.

    A chip whose traffic cannot be read is logged once, not every round; it is logged again
    only after it was readable in between.
    """

    def __init__(self, tool: HccnTool) -> None:
        self.tool = tool
        self.ports = PortTable(tool)
        self._failing = FailingChips(
            log,
            "no network traffic for hang detection; AI core, HBM and CPU decide until it is back",
            "network traffic for hang detection is back",
        )

    async def traffic(self, chip: Chip) -> tuple[int, int] | None:
        try:
            if chip.family in UB_FAMILIES:
                value = await self._ub_traffic(chip.logic_id)
            else:
                value = roce_traffic(parse_stat(await self.tool.run("-i", str(chip.phy_id), "-stat", "-g")))
        except HccnError as exc:
            self._failing.failed(chip, str(exc))
            return None
        self._failing.succeeded(chip)
        return value

    async def _ub_traffic(self, logic: int) -> tuple[int, int]:
        table = await self.ports.get(logic)
        tx = rx = 0
        answered = False
        for udie, ports in table.items():
            for port in ports:
                try:
                    out = await self.tool.run("-g", "-stat", "-i", str(logic), "-u", str(udie), "-p", str(port))
                except HccnError as exc:
                    log.debug(
                        "UB port stat failed", extra={"logic_id": logic, "udie": udie, "port": port, "error": str(exc)}
                    )
                    continue
                stat = parse_ub_stat(out)
                tx += ub_counter(stat.get(UB_TX))
                rx += ub_counter(stat.get(UB_RX))
                answered = True
        if not answered:
            self.ports.forget()  # stale, most likely: read it again next time
            raise HccnError("no UB port answered")
        return tx, rx


class HccnUbPorts:
    """The 950's down ports of a chip (`GetUBPortsDownSnapshot`), by logic id (ours; the reference
    passes a phy id on its lost-event path). Whether a UB port is wired is read once per port and
    kept while the port is in the table; a port whose `-port_info` fails counts as wired and is
    asked again next time."""

    def __init__(self, tool: HccnTool) -> None:
        self.tool = tool
        self._wired: dict[tuple[int, int, int], bool] = {}

    async def ub_ports(self, chip: Chip) -> UbPorts:
        return await self.snapshot(chip.logic_id)

    async def snapshot(self, logic: int) -> UbPorts:
        rows = parse_port_table(await self.tool.run("-g", "-dev_info", "-i", str(logic)))
        listed = {(logic, row.udie, row.port) for row in rows}
        for key in [k for k in self._wired if k[0] == logic and k not in listed]:
            del self._wired[key]  # a port gone from the table: a table that keeps changing must not grow this
        for row in rows:
            if row.port_type == UB_PORT and row.link_status == LINK_DOWN:
                await self._read_wired(logic, row)
        return count_down(rows, lambda row: self._wired.get((logic, row.udie, row.port), True))

    async def _read_wired(self, logic: int, row: PortRow) -> None:
        key = (logic, row.udie, row.port)
        if key in self._wired:
            return
        try:
            out = await self.tool.run("-g", "-port_info", "-i", str(logic), "-u", str(row.udie), "-p", str(row.port))
        except HccnError as exc:
            log.error(
                "UB port enable state unreadable; counted as wired",
                extra={"logic_id": logic, "udie": row.udie, "port": row.port, "error": str(exc)},
            )
            return
        self._wired[key] = parse_port_info(out).get(PORT_ENABLE_KEY) == PORT_ENABLE_ON
        if not self._wired[key]:
            log.debug("UB port not wired: not counted", extra={"logic_id": logic, "udie": row.udie, "port": row.port})


# ---------------------------------------------------------------------- RoCE / MAC counters (metrics)

# The `-stat -g` keys npu-exporter's RoCE collector reads (collector_for_roce.go getMainStatInfo).
ROCE_STAT_KEYS = (
    "mac_rx_mac_pause_num",
    "mac_tx_mac_pause_num",
    "mac_rx_pfc_pkt_num",
    "mac_tx_pfc_pkt_num",
    "mac_rx_bad_pkt_num",
    "mac_tx_bad_pkt_num",
    "mac_rx_bad_oct_num",
    "mac_tx_bad_oct_num",
    "mac_rx_fcs_err_pkt_num",
    "roce_rx_all_pkt_num",
    "roce_tx_all_pkt_num",
    "roce_rx_err_pkt_num",
    "roce_tx_err_pkt_num",
    "roce_rx_cnp_pkt_num",
    "roce_tx_cnp_pkt_num",
    "roce_new_pkt_rty_num",
    "roce_unexpected_ack_num",
    "roce_out_of_order_num",
    "roce_verification_err_num",
    "roce_qp_status_err_num",
    "roce_ecn_db_num",
)
# npu-exporter's RoceCollector: training cards only, and not the 950 (its ports are UB, read by
# the UB calls here).
ROCE_FAMILIES = families_with(lambda row: row.network is Network.ROCE)
UB_FAMILIES = families_with(lambda row: row.network is Network.UB)


def roce_stats(stat: Mapping[str, int], out_of_range: Collection[str] = ()) -> dict[str, int | None]:
    """The RoCE collector's counters of a `-stat -g` output. The reference reads a missing key as 0;
    a key `out_of_range` is None (dropped: no sample); an output with none of them is no RoCE
    port's, and unreadable for us."""
    if not any(key in stat or key in out_of_range for key in ROCE_STAT_KEYS):
        raise HccnError("no RoCE counter in the -stat output")
    return {key: None if key in out_of_range else stat.get(key, 0) for key in ROCE_STAT_KEYS}


class OutOfRangeCounters:
    """Counters dropped for a value outside their type's range: logged once per chip and counter,
    again only after the counter read in range in between."""

    def __init__(self) -> None:
        self._logged: set[tuple[int, str]] = set()

    def seen(self, chip: Chip, out_of_range: Mapping[str, str], in_range: Iterable[str]) -> None:
        for key, value in out_of_range.items():
            if (chip.logic_id, key) not in self._logged:
                self._logged.add((chip.logic_id, key))
                log.warning(
                    "counter out of range; not exported",
                    extra={"logic_id": chip.logic_id, "chip": chip.name, "counter": key, "value": value},
                )
        for key in in_range:
            self._logged.discard((chip.logic_id, key))


class HccnNetStats:
    """RoCE / MAC counters of a chip for the metrics (`hccn_tool -i <phy> -stat -g`), through the
    shared runner (its timeout and concurrency). A chip whose counters cannot be read is logged
    once, until they are readable again."""

    def __init__(self, tool: HccnTool) -> None:
        self.tool = tool
        self._failing = FailingChips(
            log, "RoCE counters unreadable; their metric series are dropped", "RoCE counters are back"
        )
        self._optical = HccnOptical(tool)
        self._link = HccnLink(tool)
        self._out_of_range = OutOfRangeCounters()
        self._ports = PortTable(tool)
        self._ub_links = HccnUbLinks(tool, self._ports)
        self._ub_optical = HccnUbOptical(tool, self._ports)
        self._ub_failing = FailingChips(
            log, "UB port counters unreadable; their metric series are dropped", "UB port counters are back"
        )

    async def optical(self, chip: Chip) -> dict[str, float] | None:
        return await self._optical.optical(chip)

    async def link(self, chip: Chip) -> dict[str, float] | None:
        return await self._link.link(chip)

    async def ub_links(self, chip: Chip) -> list[UbPortLink] | None:
        return await self._ub_links.ub_links(chip)

    async def ub_optical(self, chip: Chip) -> list[UbPortOptical] | None:
        return await self._ub_optical.ub_optical(chip)

    async def ub_stats(self, chip: Chip) -> list[UbPortStat] | None:
        """npu-exporter's UbCollector through the tool (collectUbInfo, getUBStatInfo): udie 0 then 1,
        each of its ports in order; a port whose run fails is left out (logged at debug)."""
        if chip.family not in UB_FAMILIES:
            return None
        logic = chip.logic_id
        try:
            table = await self._ports.get(logic)
        except HccnError as exc:
            self._ub_failing.failed(chip, str(exc))
            return None
        out: list[UbPortStat] = []
        for udie in UB_DIES:
            for port in sorted(table.get(udie, ())):
                try:
                    text = await self.tool.run("-g", "-stat", "-i", str(logic), "-u", str(udie), "-p", str(port))
                except HccnError as exc:
                    fields = {"logic_id": logic, "udie": udie, "port": port, "error": str(exc)}
                    log.debug("UB port stat failed", extra=fields)
                    continue
                out.append(ub_port_stat(udie, port, parse_ub_stat(text)))
        if table and not out:
            self._ports.forget()
            self._ub_failing.failed(chip, "no UB port answered")
            return None
        self._ub_failing.succeeded(chip)
        return out

    async def net_stats(self, chip: Chip) -> dict[str, int | None] | None:
        if chip.family not in ROCE_FAMILIES:
            return None
        try:
            counters, out_of_range = parse_counters(await self.tool.run("-i", str(chip.phy_id), "-stat", "-g"))
            stats = roce_stats(counters, [key for key in ROCE_STAT_KEYS if key in out_of_range])
        except HccnError as exc:
            self._failing.failed(chip, str(exc))
            return None
        self._failing.succeeded(chip)
        dropped = {key: value for key, value in out_of_range.items() if key in ROCE_STAT_KEYS}
        self._out_of_range.seen(chip, dropped, [key for key, value in stats.items() if value is not None])
        return stats


# ---------------------------------------------------------------------- optical module (metrics)

OPTICAL_PRESENT = "present"  # the key, and its value when a module sits in the port
OPTICAL_ABSENT = "not present"
OPTICAL_NUMBERS = (
    "Tx_Power0", "Tx_Power1", "Tx_Power2", "Tx_Power3",
    "Rx_Power0", "Rx_Power1", "Rx_Power2", "Rx_Power3",
    "Vcc", "temperature",
)  # fmt: skip


def parse_optical(text: str) -> dict[str, str]:
    """`hccn_tool -i <phy> -optical -g` (`GetNPUOpticalInfo`): lines of exactly one `:`, the key
    trimmed with its spaces turned to `_`, the value trimmed."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        parts = line.split(":")
        if len(parts) == 2:
            out[parts[0].strip().replace(" ", "_")] = parts[1].strip()
    return out


def optical_number(value: str | None) -> float | None:
    """`GetFloatDataFromStr`: "<number> <unit>"; empty, NA, "not supported", another shape or a
    bad number is no value (the reference's -1, which it never shows)."""
    if not value or any(bad in value for bad in _NOT_A_NUMBER):
        return None
    parts = value.split(" ")
    if len(parts) != 2:
        return None
    try:
        return float(parts[0])
    except ValueError:
        return None


def optical_values(info: Mapping[str, str]) -> dict[str, float]:
    """What npu-exporter's getMainOptInfo keeps: `present` 1 / 0 (no value for another answer) and
    each of OPTICAL_NUMBERS that reads as a number."""
    out: dict[str, float] = {}
    state = info.get(OPTICAL_PRESENT)
    if state in (OPTICAL_PRESENT, OPTICAL_ABSENT):
        out[OPTICAL_PRESENT] = 1.0 if state == OPTICAL_PRESENT else 0.0
    for key in OPTICAL_NUMBERS:
        if (number := optical_number(info.get(key))) is not None:
            out[key] = number
    return out


class HccnOptical:
    """A chip's optical module (`hccn_tool -i <phy> -optical -g`) through the shared runner; the 910
    families only, as npu-exporter's OpticalCollector off the 950. Failures logged once per chip."""

    def __init__(self, tool: HccnTool) -> None:
        self.tool = tool
        self._failing = FailingChips(
            log, "optical module unreadable; its metric series are dropped", "optical module readable again"
        )

    async def optical(self, chip: Chip) -> dict[str, float] | None:
        if chip.family not in ROCE_FAMILIES:
            return None
        try:
            values = optical_values(parse_optical(await self.tool.run("-i", str(chip.phy_id), "-optical", "-g")))
        except HccnError as exc:
            self._failing.failed(chip, str(exc))
            return None
        self._failing.succeeded(chip)
        return values


# ---------------------------------------------------------------------- link state, speed, bandwidth (metrics)

LINK_UNKNOWN, LINK_NOT_REPORTED = "Unknown", "NotReport"  # npu-exporter's states for a failed / skipped read
SPEED_UNKNOWN = "Unknown!"
LINK_UP_COUNT = "link up count"


def link_status_code(status: str) -> int | None:
    """npu-exporter's getLinkStatusCode as it shows: UP 1, any other answer 0, a failed read -1
    (its FailedValue), a status never asked none (its UnRetError, which it never shows)."""
    if status == LINK_NOT_REPORTED:
        return None
    if status == LINK_UNKNOWN:
        return -1
    return 1 if status == LINK_UP else 0


def parse_link_speed(text: str) -> int:
    """`hccn_tool -i <phy> -speed -g` ("Speed: 100000 Mb/s"), as getSpeedFromOutStr."""
    if SPEED_UNKNOWN in text:
        raise HccnError("link speed is unknown")
    parts = text.replace("\n", "").split(" ")
    if len(parts) != 3 or (speed := atoi(parts[1])) is None:
        raise HccnError(f"-speed output not '<label> <speed> <unit>': {text[:80]!r}")
    return speed


def parse_link_up_num(text: str) -> int:
    """`hccn_tool -i <phy> -link_stat -g` ("[device 0]link up count : 3"), as GetNPULinkUpNum: the
    first line naming the count, six fields, the last one the number."""
    for line in text.split("\n"):
        if not line or LINK_UP_COUNT not in line:
            continue
        fields = line.split()
        if len(fields) != 6 or (count := atoi(fields[-1])) is None:
            raise HccnError(f"-link_stat line not as the reference reads it: {line[:80]!r}")
        return count
    raise HccnError("no link up count in the -link_stat output")


def _rate(line: str) -> float | None:
    """The number of a `Bandwidth TX: 0.00 MB/sec` line (four fields, the third a number), else None."""
    fields = line.split()
    if len(fields) != 4:
        return None
    try:
        return float(fields[2])
    except ValueError:
        return None


def parse_bandwidth(text: str) -> tuple[float | None, float | None]:
    """`hccn_tool -i <phy> -bandwidth -g` ("Bandwidth TX: 0.00 MB/sec" and RX), as
    GetNPUInterfaceTraffic: (tx, rx) MB/s, None for a side it could not read."""
    tx: float | None = None
    rx: float | None = None
    for line in text.split("\n"):
        if (number := _rate(line)) is None:
            continue
        if "TX:" in line:
            tx = number
        if "RX:" in line:
            rx = number
    return tx, rx


def parse_speed_a5(text: str) -> int:
    """`hccn_tool -g -speed -i <logic> -u <udie> -p <port>` (950), as getSpeedFromStrA5: NA anywhere
    is a port that is down; else the first line with a `|` and no `+`, its fourth column
    `<speed> <unit>`."""
    if "NA" in text:
        raise HccnError("link speed is unknown, the port is down")
    rows = [line for line in text.strip().split("\n") if line and "+" not in line and "|" in line]
    if not rows:
        raise HccnError(f"no table row in the -speed output: {text[:80]!r}")
    parts = rows[0].split("|")
    if len(parts) < 5:
        raise HccnError(f"-speed row of fewer than four columns: {rows[0][:80]!r}")
    speed = parts[4].strip().split(" ")
    if len(speed) != 2 or (value := atoi(speed[0])) is None:
        raise HccnError(f"-speed column not '<speed> <unit>': {parts[4][:80]!r}")
    return value


def parse_uboe_bandwidth(text: str, port: int) -> tuple[float | None, float | None]:
    """`hccn_tool -g -bandwidth -i <logic> -d bond<logic>` (950, a UBoE port), as getUboeBandwidth:
    two `[dev_name: ...]` groups of TX / RX lines; an even port is the first group's, an odd one the
    second's; (None, None) when that group lacks either side."""
    groups: list[dict[str, float]] = [{}, {}]
    current, seen = 0, 0
    for line in text.split("\n"):
        if not line:
            continue
        if "[dev_name:" in line:
            seen += 1
            current = 1 if seen >= 2 else 0
            continue
        if (number := _rate(line)) is None:
            continue
        for side in ("TX", "RX"):
            if f"{side}:" in line:
                groups[current][side] = number
    group = groups[port % 2]
    if "TX" not in group or "RX" not in group:
        return None, None
    return group["TX"], group["RX"]


def parse_optical_a5(text: str) -> dict[str, str]:
    """`hccn_tool -g -optical -i <logic> -u <udie> -p <port>` (950), as GetNpuOpticalInfoNpu and
    parseSecondTableColumns: an output without "Power" is unreadable; the rows between the fifth and
    the sixth `+-` separator: one with `optical_` counts toward `optical_index`, one naming an xPower
    with at least eleven `|` parts gives its fourth column's key the fifth column's value, unless that
    holds a `-`. A row too short for its columns is skipped (the reference indexes it and panics)."""
    if "Power" not in text:
        raise HccnError("optical info is not valid")
    out: dict[str, str] = {}
    indexes = separators = 0
    for raw in text.strip().split("\n"):
        line = raw.strip()
        if line.startswith("+-"):
            separators += 1
            if separators == 6:
                break
            continue
        if separators < 5:
            continue
        parts = line.split("|")
        if "optical_" in line and len(parts) >= 2:
            indexes += 1
        if len(parts) < 11:
            continue
        key, value = parts[4].strip(), parts[5].strip()
        if "-" in value:
            continue
        if key and "xPower" in line:
            out[key] = value
    out[OPTICAL_INDEX_KEY] = str(indexes)
    return out


# The 950 main boards npu-exporter's OpticalCollector skips (notSupportedOpticalNpuDevices: the Atlas
# 350 1P / 2P / 4P, the Atlas 950 1D and the Atlas 950 boards).
OPTICAL_UNSUPPORTED_950_BOARDS = frozenset({0x68, 0x6B, 0x6C, 0x03, 0x07})


class HccnUbOptical:
    """The 950's per-port optical modules (npu-exporter's OpticalCollector on the 950,
    collectOpticalNpuInfo): one tool run per port of udie 0 then 1; a port whose run fails or prints
    no power has no series."""

    def __init__(self, tool: HccnTool, ports: PortTable) -> None:
        self.tool = tool
        self.ports = ports

    async def ub_optical(self, chip: Chip) -> list[UbPortOptical] | None:
        if chip.family not in UB_FAMILIES or main_board(chip) in OPTICAL_UNSUPPORTED_950_BOARDS:
            return None
        try:
            table = await self.ports.get(chip.logic_id)
        except HccnError as exc:
            log.debug("950 port table unreadable", extra={"logic_id": chip.logic_id, "error": str(exc)})
            return None
        out: list[UbPortOptical] = []
        for udie in UB_DIES:
            for port in sorted(table.get(udie, ())):
                where = ("-i", str(chip.logic_id), "-u", str(udie), "-p", str(port))
                try:
                    info = parse_optical_a5(await self.tool.run("-g", "-optical", *where))
                except HccnError as exc:
                    log.debug("950 port optical read failed", extra={"logic_id": chip.logic_id, "error": str(exc)})
                    continue
                out.append(UbPortOptical(udie, port, optical_port_values(info)))
        return out


# The 950 main boards npu-exporter's NetworkCollector skips (notSupportedNetworkNpuDevices: Atlas 350 1P).
NETWORK_UNSUPPORTED_950_BOARDS = frozenset({0x68})


class HccnUbLinks:
    """The 950's per-port link state, bandwidth and speed (npu-exporter's NetworkCollector on the
    950, collectNetworkNpuInfo): three tool runs per port of udie 0 then 1. The state is -1 when
    its run fails; bandwidth and speed have no value then."""

    def __init__(self, tool: HccnTool, ports: PortTable) -> None:
        self.tool = tool
        self.ports = ports
        self._failing = FailingChips(
            log, "950 port table unreadable; the per-port link series are dropped", "950 port table readable again"
        )

    async def ub_links(self, chip: Chip) -> list[UbPortLink] | None:
        if chip.family not in UB_FAMILIES or main_board(chip) in NETWORK_UNSUPPORTED_950_BOARDS:
            return None
        logic = str(chip.logic_id)
        try:
            table = await self.ports.get(chip.logic_id)
        except HccnError as exc:
            self._failing.failed(chip, str(exc))
            return None
        self._failing.succeeded(chip)
        out: list[UbPortLink] = []
        for udie in UB_DIES:
            for port in sorted(table.get(udie, ())):
                where = ("-i", logic, "-u", str(udie), "-p", str(port))
                values: dict[str, float] = {}
                try:
                    status = parse_link_status(await self.tool.run("-g", "-link", *where))
                except HccnError as exc:
                    log.debug("950 port link read failed", extra={"logic_id": chip.logic_id, "error": str(exc)})
                    status = LINK_UNKNOWN
                if (code := link_status_code(status)) is not None:
                    values["link_status"] = code
                try:
                    if self.ports.kinds.get((udie, port)) == BONDING_PORT:
                        out_text = await self.tool.run("-g", "-bandwidth", "-i", logic, "-d", f"bond{logic}")
                        tx, rx = parse_uboe_bandwidth(out_text, port)
                    else:
                        tx, rx = parse_bandwidth(await self.tool.run("-g", "-bandwidth", *where, "-time", "100"))
                except HccnError as exc:
                    log.debug("950 port bandwidth read failed", extra={"logic_id": chip.logic_id, "error": str(exc)})
                else:
                    values.update({k: v for k, v in (("bandwidth_tx", tx), ("bandwidth_rx", rx)) if v is not None})
                try:
                    values["link_speed"] = parse_speed_a5(await self.tool.run("-g", "-speed", *where))
                except HccnError as exc:
                    log.debug("950 port speed read failed", extra={"logic_id": chip.logic_id, "error": str(exc)})
                out.append(UbPortLink(udie, port, values))
        return out


def main_board(chip: Chip) -> int | None:
    return chip.static.main_board_id.value if chip.static.main_board_id.is_ok else None


class HccnLink:
    """A chip's link state, speed, link-up count and bandwidth (npu-exporter's NetworkCollector,
    910 families), four tool runs through the shared runner. The state is -1 when unreadable, as
    the reference shows it; the others have no value then."""

    def __init__(self, tool: HccnTool) -> None:
        self.tool = tool
        self._failing = FailingChips(log, "link state unreadable; shown as -1", "link state readable again")

    async def link(self, chip: Chip) -> dict[str, float] | None:
        if chip.family not in ROCE_FAMILIES:
            return None
        phy = str(chip.phy_id)
        out: dict[str, float] = {}
        try:
            status = parse_link_status(await self.tool.run("-i", phy, "-link", "-g"))
            self._failing.succeeded(chip)
        except HccnError as exc:
            self._failing.failed(chip, str(exc))
            status = LINK_UNKNOWN
        if (code := link_status_code(status)) is not None:
            out["link_status"] = code
        for key, args, parse in (
            ("link_speed", ("-speed", "-g"), parse_link_speed),
            ("link_up_num", ("-link_stat", "-g"), parse_link_up_num),
        ):
            try:
                out[key] = parse(await self.tool.run("-i", phy, *args))
            except HccnError as exc:
                fields = {"chip": chip.name, "command": " ".join(args), "error": str(exc)}
                log.debug("hccn_tool link read failed", extra=fields)
        try:
            tx, rx = parse_bandwidth(await self.tool.run("-i", phy, "-bandwidth", "-g"))
        except HccnError as exc:
            log.debug("hccn_tool bandwidth read failed", extra={"chip": chip.name, "error": str(exc)})
        else:
            out.update({k: v for k, v in (("bandwidth_tx", tx), ("bandwidth_rx", rx)) if v is not None})
        return out


class HccnRoceLink:
    """The RoCE link state of a 910 chip (`GetNPULinkStatus`), by phy id as the reference asks it."""

    def __init__(self, tool: HccnTool) -> None:
        self.tool = tool

    async def link_status(self, chip: Chip) -> str:
        return parse_link_status(await self.tool.run("-i", str(chip.phy_id), "-link", "-g"))
