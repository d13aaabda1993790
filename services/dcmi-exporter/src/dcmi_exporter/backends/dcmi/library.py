"""Loading libdcmi.so and calling it through ctypes, one symbol at a time.

Symbols are resolved lazily, on first use, and cached with their argtypes/restype set: drivers
differ in what they export (older ones lack e.g. the fault subscription), so a missing symbol
must cost one feature, never the whole exporter. A missing symbol raises SymbolMissing, a
NotSupported, exactly like a -8255 answer; every return code goes through `errors.check`.

Declarations were written from the contract (section 10) and checked against the reference header
dcmi_interface_api.h of Ascend/mind-cluster (and, for the two functions that header lacks or
wraps, against the driver's own header: `dcmi_subscribe_fault_event` takes the callback as a
4th argument, `dcmi_get_affinity_cpu_info_by_device_id(int, int, char *, int *)`). The v2 calls
(`dcmiv2_*`, the 950 drivers; see generations.py) were checked against the reference's
dcmi_interface_api_v2.h and the function pointers its dcmi_v2.go calls through: a chip is its
logic id, `dcmiv2_subscribe_fault_event` takes the callback as a 3rd argument, and the structs
are v1's.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from dcmi_exporter.backends.dcmi import structs as s
from dcmi_exporter.backends.errors import DcmiError, SymbolMissing, check

# The reference resolves "libdcmi.so" through LD_LIBRARY_PATH and the loader cache; a bare name
# does the same here. Deployments usually point it at /usr/local/Ascend/driver/lib64/driver/.
DEFAULT_LIB_PATH = "libdcmi.so"

_int = ctypes.c_int
_uint = ctypes.c_uint
_pint = ctypes.POINTER(ctypes.c_int)
_puint = ctypes.POINTER(ctypes.c_uint)

# name -> argtypes; every DCMI function returns int. Enum arguments and out-params are int sized.
SIGNATURES: dict[str, Sequence[Any]] = {
    "dcmi_init": (),
    "dcmi_get_dcmi_version": (ctypes.c_char_p, _int),
    "dcmi_get_card_list": (_pint, _pint, _int),
    "dcmi_get_device_num_in_card": (_int, _pint),
    "dcmi_get_device_logic_id": (_pint, _int, _int),  # out-param FIRST
    "dcmi_get_device_phyid_from_logicid": (_uint, _puint),
    "dcmi_get_card_id_device_id_from_logicid": (_pint, _pint, _uint),
    "dcmi_get_device_chip_info": (_int, _int, ctypes.POINTER(s.DcmiChipInfo)),
    "dcmi_get_device_chip_info_v2": (_int, _int, ctypes.POINTER(s.DcmiChipInfoV2)),
    "dcmi_get_device_health": (_int, _int, _puint),
    "dcmi_get_device_errorcode_v2": (_int, _int, _pint, _puint, _uint),
    "dcmi_get_device_network_health": (_int, _int, _pint),  # enum dcmi_rdfx_detect_result *
    "dcmi_get_device_ip": (
        _int,
        _int,
        _int,  # enum dcmi_port_type: 1 RoCE
        _int,  # port id
        ctypes.POINTER(s.DcmiIpAddr),
        ctypes.POINTER(s.DcmiIpAddr),
    ),
    "dcmi_get_device_temperature": (_int, _int, _pint),
    "dcmi_get_device_power_info": (_int, _int, _pint),  # 0.1 W
    "dcmi_get_device_hbm_info": (_int, _int, ctypes.POINTER(s.DcmiHbmInfo)),
    "dcmi_get_device_utilization_rate": (_int, _int, _int, _puint),
    "dcmi_get_device_resource_info": (_int, _int, ctypes.POINTER(s.DcmiProcMemInfo), _pint),
    "dcmi_set_device_reset": (_int, _int, _int),  # enum dcmi_reset_channel: 0 out-of-band, 1 in-band
    "dcmi_get_device_boot_status": (_int, _int, _pint),  # enum dcmi_boot_status *
    "dcmi_create_vdevice": (
        _int,
        _int,
        ctypes.POINTER(s.DcmiCreateVdevResStru),
        ctypes.POINTER(s.DcmiCreateVdevOut),
    ),
    "dcmi_set_destroy_vdevice": (_int, _int, _uint),
    # The filter travels BY VALUE (a 48-byte struct on the stack), then the callback pointer.
    "dcmi_subscribe_fault_event": (_int, _int, s.DcmiEventFilter, s.FaultEventCallback),
    "dcmi_get_device_board_info": (_int, _int, ctypes.POINTER(s.DcmiBoardInfo)),
    "dcmi_get_product_type": (_int, _int, ctypes.c_char_p, _int),
    "dcmi_get_netdev_brother_device": (_int, _int, _pint),
    "dcmi_get_device_type": (_int, _int, _pint),  # enum dcmi_unit_type *: 0 NPU
    # (card, dev, enum dcmi_main_cmd, sub command, buffer, in: buffer size / out: bytes written)
    "dcmi_get_device_info": (_int, _int, _int, _uint, ctypes.c_void_p, _puint),
    "dcmi_get_mainboard_id": (_int, _int, _puint),
    "dcmi_get_affinity_cpu_info_by_device_id": (_int, _int, ctypes.c_char_p, _pint),
    "dcmi_get_device_outband_channel_state": (_int, _int, _pint),
    "dcmi_pre_reset_soc": (_int, _int),
    "dcmi_rescan_soc": (_int, _int),
    # (card, dev, enum dcmi_die_type: 0 NDIE, 1 VDIE, out)
    "dcmi_get_device_die_v2": (_int, _int, _int, ctypes.POINTER(s.DcmiDieId)),
    # (card, dev, out count) and (card, dev, index, eid_info[32], in: capacity / out: count)
    "dcmi_get_urma_device_cnt": (_int, _int, _puint),
    "dcmi_get_eid_list_by_urma_dev_index": (_int, _int, _uint, ctypes.POINTER(s.DcmiUrmaEidInfo), _puint),
    # v2: the chip is its logic id (`int dev_id`); every struct is the v1 one.
    "dcmiv2_init": (),
    "dcmiv2_get_dcmi_version": (ctypes.c_char_p, _int),
    "dcmiv2_get_device_list": (_pint, _pint, _int),  # (int *list, int *num, int len): the list FIRST
    "dcmiv2_get_chip_phy_id_by_dev_id": (_uint, _puint),
    "dcmiv2_get_device_chip_info": (_int, ctypes.POINTER(s.DcmiChipInfoV2)),
    "dcmiv2_get_device_board_info": (_int, ctypes.POINTER(s.DcmiBoardInfo)),
    "dcmiv2_get_device_type": (_int, _pint),
    "dcmiv2_get_device_info": (_int, _int, _uint, ctypes.c_void_p, _puint),
    "dcmiv2_get_mainboard_id": (_int, _puint),
    "dcmiv2_get_affinity_cpu_info_by_dev_id": (_int, ctypes.c_char_p, _pint),
    "dcmiv2_get_device_health": (_int, _puint),
    "dcmiv2_get_device_error_code_list": (_int, _pint, _puint, _uint),
    "dcmiv2_get_device_network_health": (_int, _pint),
    "dcmiv2_get_device_temperature": (_int, _pint),
    "dcmiv2_get_device_power_info": (_int, _pint),
    "dcmiv2_get_device_hbm_info": (_int, ctypes.POINTER(s.DcmiHbmInfo)),
    "dcmiv2_get_device_utilization_rate": (_int, _int, _puint),
    "dcmiv2_get_device_proc_mem_info": (_int, ctypes.POINTER(s.DcmiProcMemInfo), _pint),
    "dcmiv2_get_device_boot_status": (_int, _pint),
    "dcmiv2_subscribe_fault_event": (_int, s.DcmiEventFilter, s.FaultEventCallback),
    "dcmiv2_reset_device": (_int, _int),
    "dcmiv2_get_device_outband_channel_state": (_int, _pint),
    "dcmiv2_pre_reset_device": (_int,),
    "dcmiv2_rescan_device": (_int,),
    "dcmiv2_get_device_die_id": (_int, _int, ctypes.POINTER(s.DcmiDieId)),  # (logic, enum dcmi_die_type, out)
    "dcmiv2_get_urma_device_cnt": (_int, _puint),
    "dcmiv2_get_eid_list_by_urma_dev_index": (_int, _uint, ctypes.POINTER(s.DcmiUrmaEidInfo), _puint),
    # enum dcmi_multi_die_policy (0 union, 1 independent), as the reference's wrapper passes it: unsigned
    "dcmi_set_multi_die_policy": (_uint,),
    # Metrics (npu-exporter parity); optional: a driver without them costs those series only.
    "dcmi_get_device_voltage": (_int, _int, _puint),  # 0.01 V
    "dcmi_get_device_frequency": (_int, _int, _int, _puint),  # (card, dev, enum dcmi_freq_type, MHz)
    "dcmi_get_device_ecc_info": (_int, _int, _int, ctypes.POINTER(s.DcmiEccInfo)),  # enum dcmi_device_type
    "dcmi_get_pcie_link_bandwidth_info": (_int, _int, ctypes.POINTER(s.DcmiPcieLinkBandwidthInfo)),
    "dcmi_get_device_multi_utilization_rate": (_int, _int, ctypes.POINTER(s.DcmiMultiUtilizationInfo)),
    "dcmi_get_hccs_link_bandwidth_info": (_int, _int, ctypes.POINTER(s.DcmiHccsBandwidthInfo)),
    "dcmi_get_device_memory_info_v3": (_int, _int, ctypes.POINTER(s.DcmiMemoryInfo)),
    "dcmi_get_card_elabel_v2": (_int, ctypes.POINTER(s.DcmiElabelInfo)),  # by card, not chip
    "dcmiv2_get_device_elabel_info": (_int, ctypes.POINTER(s.DcmiElabelInfo)),
    "dcmiv2_get_device_voltage": (_int, _puint),
    "dcmiv2_get_device_frequency": (_int, _int, _puint),
    "dcmiv2_get_device_ecc_info": (_int, _int, ctypes.POINTER(s.DcmiEccInfo)),
    "dcmiv2_get_pcie_link_bandwidth_info": (_int, ctypes.POINTER(s.DcmiPcieLinkBandwidthInfo)),
    "dcmiv2_get_device_multi_utilization_rate": (_int, ctypes.POINTER(s.DcmiMultiUtilizationInfo)),
}


class DcmiLibrary:
    """One loaded libdcmi.so. Thread-safe: calls run concurrently from the exporter's call pool."""

    def __init__(
        self, path: str | os.PathLike[str] = DEFAULT_LIB_PATH, signatures: Mapping[str, Sequence[Any]] = SIGNATURES
    ) -> None:
        """`signatures`: the functions this library may be asked for (another library of the driver,
        liblingqu-dcmi.so, is bound by the same class with its own)."""
        self.path = os.fspath(path)
        self._signatures = signatures
        self._dll: ctypes.CDLL | None = None
        self._funcs: dict[str, Any] = {}
        # Guards loading and the symbol cache only; never held across a library call, which may hang.
        self._mutex = threading.Lock()

    def open(self) -> None:
        """dlopen the library; raises DcmiError when the file cannot be loaded at all."""
        with self._mutex:
            if self._dll is not None:
                return
            try:
                # RTLD_LOCAL (ctypes' default), unlike the reference's RTLD_GLOBAL: nothing else in
                # this process needs libdcmi's symbols, and keeping them local means a second
                # library (a test double, another driver copy) can never interpose on them.
                self._dll = ctypes.CDLL(self.path)
            except OSError as exc:
                raise DcmiError("dlopen", message=f"cannot load {self.path}: {exc}") from exc

    @property
    def loaded(self) -> bool:
        return self._dll is not None

    def has(self, name: str) -> bool:
        """Whether the library exports `name` (resolving and caching it)."""
        try:
            self.func(name)
        except SymbolMissing:
            return False
        return True

    def func(self, name: str) -> Any:
        """The ctypes function for `name`, declared from SIGNATURES; SymbolMissing if not exported."""
        fn = self._funcs.get(name)
        if fn is not None:
            return fn
        argtypes = self._signatures.get(name)
        if argtypes is None:
            raise KeyError(f"{name} has no declaration in {self.path}'s signatures")
        with self._mutex:
            fn = self._funcs.get(name)
            if fn is not None:
                return fn
            if self._dll is None:
                raise DcmiError(name, message=f"{self.path} is not loaded")
            try:
                # Item access returns a fresh function object per call, so setting argtypes on it
                # cannot clash with another user of the same CDLL.
                fn = self._dll[name]
            except AttributeError:
                raise SymbolMissing(name) from None
            fn.argtypes = list(argtypes)
            fn.restype = ctypes.c_int
            self._funcs[name] = fn
            return fn

    def call(self, name: str, *args: Any) -> None:
        """Call `name` and raise the typed error for a non-zero return code."""
        rc = self.func(name)(*args)
        check(name, int(rc))

    def rc(self, name: str, *args: Any) -> int:
        """Call `name` and return its raw return code (SymbolMissing still raises)."""
        return int(self.func(name)(*args))
