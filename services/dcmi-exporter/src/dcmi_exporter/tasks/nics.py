"""The host NICs the npu-nic mapping names, and their addresses (NodeInfo.nic_addresses).

The reference's device plugin reads /user/mindx-dl/npu/npu-nic-mapping.json (`npuNics`: an npuId
and the NIC names to try for it, in order) and asks Go's net.InterfaceByName(name).Addrs() for the
L3 (RoCE) rank address of each chip. Its manifests give the plugin no host network, so it finds no
host NIC there; ours reads them in the exporter, which runs with hostNetwork, and serves them in
NodeInfo: NIC name -> addresses, unfiltered (the rank-level builder skips loopback and link-local
as the reference does). Addresses come from libc's getifaddrs, which lists them from the kernel's
netlink dump as Go's Addrs() does (IPv4 before IPv6, each family in the kernel's order).

The mapping is read once at start, as the reference's sync.Once; the addresses are re-read every
`period` seconds, since DHCP or an operator may change them while the exporter runs.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import ipaddress
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ascend_common.adapters.inputs import BadInputs, read_json_file
from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.jsonin import InputError
from pydantic import BaseModel, ConfigDict, ValidationError

from dcmi_exporter.tasks.periodic import PeriodicTask, Round

log = logging.getLogger(__name__)

DEFAULT_PERIOD_S = 60.0


class NpuNicItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # Go's json.Unmarshal ignores unknown keys

    npuId: int
    nicNames: list[str] = []


class NpuNicMapping(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    npuNics: list[NpuNicItem] = []

    def nic_names(self) -> list[str]:
        """Every NIC the mapping names, once, in the order they first appear."""
        return list(dict.fromkeys(name for item in self.npuNics for name in item.nicNames))

    def npu_nics(self) -> dict[int, list[str]]:
        """npuId -> its NIC names in priority order (NodeInfo.npu_nics). A repeated npuId keeps its
        first row, as the reference's `getNpuToNicNames` returns the first match."""
        nics: dict[int, list[str]] = {}
        for item in self.npuNics:
            nics.setdefault(item.npuId, list(item.nicNames))
        return nics


MAPPING_REFUSED = "npu-nic-mapping file is not a mapping: no NIC addresses"


def load_mapping(path: Path, bad_inputs: BadInputs | None = None) -> NpuNicMapping | None:
    """The mapping file; None when it is missing (a warning, as the reference's), unreadable or
    refused (an error, and named in `bad_inputs`): the exporter runs without NIC addresses."""
    bad = bad_inputs or BadInputs()
    try:
        doc = read_json_file(path)
    except FileNotFoundError:
        log.warning("npu-nic-mapping file not found: no NIC addresses", extra={"path": str(path)})
        return None
    except OSError as exc:
        bad.refused(
            "npu_nic_mapping",
            f"{path}: {exc.strerror or exc}",
            "npu-nic-mapping file unreadable: no NIC addresses",
            path,
        )
        return None
    except InputError as exc:
        bad.refused("npu_nic_mapping", str(exc), MAPPING_REFUSED, path)
        return None
    try:
        mapping = NpuNicMapping.model_validate(doc)
    except ValidationError as exc:
        reason = f"{path}: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        bad.refused("npu_nic_mapping", reason, MAPPING_REFUSED, path)
        return None
    bad.accepted("npu_nic_mapping")
    return mapping


class _SockAddr(ctypes.Structure):
    _fields_ = [("sa_family", ctypes.c_ushort)]


class _IfAddrs(ctypes.Structure):
    pass


# struct ifaddrs (<ifaddrs.h>); the fields after ifa_addr are declared for the layout only.
_IfAddrs._fields_ = [
    ("ifa_next", ctypes.POINTER(_IfAddrs)),
    ("ifa_name", ctypes.c_char_p),
    ("ifa_flags", ctypes.c_uint),
    ("ifa_addr", ctypes.POINTER(_SockAddr)),
    ("ifa_netmask", ctypes.POINTER(_SockAddr)),
    ("ifa_ifu", ctypes.POINTER(_SockAddr)),
    ("ifa_data", ctypes.c_void_p),
]

# Where the address bytes sit in struct sockaddr_in (family, port, in_addr) and sockaddr_in6
# (family, port, flowinfo, in6_addr): the same on every Linux ABI.
_IN4_OFFSET, _IN4_LEN = 4, 4
_IN6_OFFSET, _IN6_LEN = 8, 16


def _libc() -> ctypes.CDLL:
    lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    lib.getifaddrs.argtypes = [ctypes.POINTER(ctypes.POINTER(_IfAddrs))]
    lib.getifaddrs.restype = ctypes.c_int
    lib.freeifaddrs.argtypes = [ctypes.POINTER(_IfAddrs)]
    lib.freeifaddrs.restype = None
    return lib


def host_addresses() -> dict[str, list[str]]:
    """Every host interface with an address -> its IPv4 and IPv6 addresses, as the kernel lists them.

    Blocking (a netlink round trip): call it in a thread. Raises OSError when getifaddrs fails."""
    libc = _libc()
    head = ctypes.POINTER(_IfAddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"getifaddrs: {os.strerror(err)}")
    out: dict[str, list[str]] = {}
    try:
        node = head
        while node:
            entry = node.contents
            addr = entry.ifa_addr
            if addr and entry.ifa_name is not None:
                text = _address_text(addr)
                if text is not None:
                    out.setdefault(link_name(entry.ifa_name.decode(errors="replace")), []).append(text)
            node = entry.ifa_next
    finally:
        libc.freeifaddrs(head)
    return out


def link_name(label: str) -> str:
    """The interface of an address label: glibc names an IPv4 address by its label ("ens1f2:1" for an
    alias), Go's Addrs() lists it under its link; a Linux interface name never holds a colon."""
    return label.partition(":")[0]


def _address_text(addr: ctypes._Pointer[_SockAddr]) -> str | None:
    family = addr.contents.sa_family
    base = ctypes.addressof(addr.contents)
    if family == socket.AF_INET:
        return str(ipaddress.IPv4Address(ctypes.string_at(base + _IN4_OFFSET, _IN4_LEN)))
    if family == socket.AF_INET6:
        return str(ipaddress.IPv6Address(ctypes.string_at(base + _IN6_OFFSET, _IN6_LEN)))
    return None  # AF_PACKET and the like: a link, not an address


def mapped_addresses(mapping: NpuNicMapping, host: dict[str, list[str]]) -> dict[str, list[str]]:
    """The mapped NICs -> their addresses; a NIC the host lacks (or that has none) maps to []."""
    return {name: list(host.get(name, [])) for name in mapping.nic_names()}


class NicSink(Protocol):
    def set_nic_addresses(self, addresses: dict[str, list[str]] | None) -> None: ...

    def set_npu_nics(self, npu_nics: dict[int, list[str]]) -> None: ...


class NicAddressTask(PeriodicTask):
    """Reads the mapping once, then the mapped NICs' addresses every `period` seconds, into `sink`.
    Its owner loads it and reads the addresses once before it starts, so the first node info has them."""

    name = "nic-addresses"
    essential = False  # the addresses are extras of the node info; a node without them still serves

    def __init__(
        self,
        mapping_path: Path,
        sink: NicSink,
        tasks: TaskScope,
        *,
        period: float = DEFAULT_PERIOD_S,
        read_host: Callable[[], dict[str, list[str]]] = host_addresses,
        bad_inputs: BadInputs | None = None,
    ) -> None:
        super().__init__(tasks)
        self._path = mapping_path
        self._sink = sink
        self._period = period
        self._read_host = read_host
        self._mapping: NpuNicMapping | None = None
        self._bad_inputs = bad_inputs

    async def load(self) -> bool:
        """Read the mapping file (in a thread); False when there is none to serve."""
        self._mapping = await asyncio.to_thread(load_mapping, self._path, self._bad_inputs)
        if self._mapping is not None:
            self._sink.set_npu_nics(self._mapping.npu_nics())
            log.info("npu-nic-mapping loaded", extra={"path": str(self._path), "nics": self._mapping.nic_names()})
        return self._mapping is not None

    async def refresh(self) -> None:
        """One read of the host's addresses; a failed read keeps the last answer (logged)."""
        if self._mapping is None:
            return
        try:
            host = await asyncio.to_thread(self._read_host)
        except OSError as exc:
            log.warning("host NIC addresses unreadable; keeping the last", extra={"error": str(exc)})
            return
        self._sink.set_nic_addresses(mapped_addresses(self._mapping, host))

    def schedule(self) -> list[Round]:
        return [Round(self.name, self._period, self.refresh, "NIC address round failed")]
