"""ctypes declarations of the DCMI structs the binding passes (contract section 10).

Written from the contract's call shapes and checked field by field against the reference header
(Ascend/mind-cluster, component/ascend-common/devmanager/dcmi/dcmi_interface_api.h). Every struct
uses natural C alignment: ctypes computes sizes and offsets exactly as the C compiler does, so no
size is written down here; tests/cdouble/layout.c prints what the compiler computes from the same
shapes and test_dcmi_layout.py compares the two.

C enums (ip_type, the event type, port type, reset channel, boot status) are `int` sized on every
ABI the driver ships for, so they are declared as c_int.
"""

from __future__ import annotations

import ctypes

CHIP_NAME_LEN = 32  # MAX_CHIP_NAME_LEN
TEMPLATE_NAME_LEN = 32  # TEMPLATE_NAME_LEN
VDEV_RESERVED_LEN = 32  # DCMI_VDEV_FOR_RESERVE
EVENT_NAME_LEN = 256  # DCMI_MAX_EVENT_NAME_LENGTH
EVENT_DATA_LEN = 32  # DCMI_MAX_EVENT_DATA_LENGTH
EVENT_RESV_LEN = 32  # DCMI_MAX_EVENT_RESV_LENGTH
MAX_ERROR_CODES = 128  # the reference's MaxErrorCodeCount
MAX_PROCS = 32  # processes dcmi_get_device_resource_info may write
SPOD_RESERVE_LEN = 6  # dcmi_spod_info.reserve (the reference's DcmiSpodReserveLen)
DIE_ID_COUNT = 5  # DIE_ID_COUNT: the words of struct dcmi_die_id (the reference's DieIDCount)
URMA_EID_SIZE = 16  # DCMI_URMA_EID_SIZE: one EID, 128 bits
URMA_EID_MAX_COUNT = 32  # DCMI_URMA_EID_MAX_COUNT: the EIDs one urma device may list (the reference's EidNumMax)
MAX_URMA_DEVICES = 128  # the reference's MaxUrmaDevCnt: a larger device count is refused

IP_TYPE_V4 = 0
IP_TYPE_V6 = 1
EVENT_TYPE_FAULT = 0  # DCMI_DMS_FAULT_EVENT


class DcmiChipInfo(ctypes.Structure):
    """dcmi_get_device_chip_info (v1): the fallback when v2 is missing or unsupported."""

    _fields_ = [
        ("chip_type", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("chip_name", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("chip_ver", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("aicore_cnt", ctypes.c_uint),
    ]


class DcmiChipInfoV2(ctypes.Structure):
    _fields_ = [
        ("chip_type", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("chip_name", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("chip_ver", ctypes.c_ubyte * CHIP_NAME_LEN),
        ("aicore_cnt", ctypes.c_uint),
        ("npu_name", ctypes.c_ubyte * CHIP_NAME_LEN),
    ]


class DcmiHbmInfo(ctypes.Structure):
    """Sizes in MB. The u64/u32 mix has padding after `freq` and `temp`: ctypes inserts it."""

    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),
        ("freq", ctypes.c_uint),
        ("memory_usage", ctypes.c_ulonglong),
        ("temp", ctypes.c_int),
        ("bandwith_util_rate", ctypes.c_uint),  # sic, as spelled by the library
    ]


class DcmiIpUAddr(ctypes.Union):
    _fields_ = [
        ("ip6", ctypes.c_ubyte * 16),
        ("ip4", ctypes.c_ubyte * 4),
    ]


class DcmiIpAddr(ctypes.Structure):
    _fields_ = [
        ("u_addr", DcmiIpUAddr),
        ("ip_type", ctypes.c_int),  # enum dcmi_ip_addr_type: 0 v4, 1 v6
    ]


class DcmiProcMemInfo(ctypes.Structure):
    _fields_ = [
        ("proc_id", ctypes.c_int),
        ("proc_mem_usage", ctypes.c_ulong),  # bytes; C `unsigned long`, 8 bytes on LP64
    ]


class DcmiBoardInfo(ctypes.Structure):
    _fields_ = [
        ("board_id", ctypes.c_uint),
        ("pcb_id", ctypes.c_uint),
        ("bom_id", ctypes.c_uint),
        ("slot_id", ctypes.c_uint),
    ]


class DcmiSpodInfo(ctypes.Structure):
    """dcmi_get_device_info(DCMI_MAIN_CMD_CHIP_INF, SPOD_INFO): an A3 chip's place in its super pod."""

    _fields_ = [
        ("sdid", ctypes.c_uint),  # super device id: server index in bits 22..31, device in 0..15
        ("scale_type", ctypes.c_uint),
        ("super_pod_id", ctypes.c_uint),
        ("server_id", ctypes.c_uint),  # the server index inside the super pod
        ("chassis_id", ctypes.c_uint),  # A5 only
        ("super_pod_type", ctypes.c_uint),  # A5 only
        ("reserve", ctypes.c_uint * SPOD_RESERVE_LEN),
    ]


class DcmiDieId(ctypes.Structure):
    """dcmi_get_device_die_v2 / dcmiv2_get_device_die_id: one die's id, five words."""

    _fields_ = [("soc_die", ctypes.c_uint * DIE_ID_COUNT)]


class DcmiUrmaEidIn4(ctypes.Structure):
    _fields_ = [
        ("reserved", ctypes.c_ulong),  # 0 when an IPv4 address is mapped to IPv6
        ("prefix", ctypes.c_uint),  # 0x0000ffff when mapped
        ("addr", ctypes.c_uint),
    ]


class DcmiUrmaEidIn6(ctypes.Structure):
    _fields_ = [
        ("subnet_prefix", ctypes.c_ulong),
        ("interface_id", ctypes.c_ulong),
    ]


class DcmiUrmaEid(ctypes.Union):
    """dcmi_urma_eid_t: 16 bytes, aligned 8 by its `unsigned long` views. Only `raw` is read: the
    reference encodes the raw bytes, and the typed views are there for the size and alignment."""

    _fields_ = [
        ("raw", ctypes.c_ubyte * URMA_EID_SIZE),
        ("in4", DcmiUrmaEidIn4),
        ("in6", DcmiUrmaEidIn6),
    ]


class DcmiUrmaEidInfo(ctypes.Structure):
    """dcmi_urma_eid_info_t: 16 + 4 + 4 bytes of tail padding = 24, an array element's stride."""

    _fields_ = [
        ("eid", DcmiUrmaEid),
        ("eid_index", ctypes.c_uint),
    ]


class DcmiCreateVdevResStru(ctypes.Structure):
    """dcmi_create_vdevice input; 0xFFFFFFFF ids let the library choose."""

    _fields_ = [
        ("vdev_id", ctypes.c_uint),
        ("vfg_id", ctypes.c_uint),
        ("template_name", ctypes.c_char * TEMPLATE_NAME_LEN),
        ("reserved", ctypes.c_ubyte * 64),
    ]


class DcmiCreateVdevOut(ctypes.Structure):
    _fields_ = [
        ("vdev_id", ctypes.c_uint),
        ("pcie_bus", ctypes.c_uint),
        ("pcie_device", ctypes.c_uint),
        ("pcie_func", ctypes.c_uint),
        ("vfg_id", ctypes.c_uint),
        ("reserved", ctypes.c_ubyte * VDEV_RESERVED_LEN),
    ]


class DcmiEventFilter(ctypes.Structure):
    """Passed BY VALUE to dcmi_subscribe_fault_event; all zero = no filter (what the reference sends)."""

    _fields_ = [
        ("filter_flag", ctypes.c_ulonglong),
        ("event_id", ctypes.c_uint),
        ("severity", ctypes.c_ubyte),
        ("node_type", ctypes.c_ubyte),
        ("resv", ctypes.c_ubyte * EVENT_RESV_LEN),
    ]


class DcmiDmsFaultEvent(ctypes.Structure):
    # Newer drivers carve os_id / node_type_ex / sub_node_type_ex out of `resv`; the 32 bytes and
    # every offset stay the same, and the binding reads none of them.
    _fields_ = [
        ("event_id", ctypes.c_uint),
        ("deviceid", ctypes.c_ushort),  # the logic id
        ("node_type", ctypes.c_ubyte),
        ("node_id", ctypes.c_ubyte),
        ("sub_node_type", ctypes.c_ubyte),
        ("sub_node_id", ctypes.c_ubyte),
        ("severity", ctypes.c_ubyte),  # 0 warning .. 3 critical
        ("assertion", ctypes.c_ubyte),  # 0 recover, 1 occur, 2 once
        ("event_serial_num", ctypes.c_int),
        ("notify_serial_num", ctypes.c_int),
        ("alarm_raised_time", ctypes.c_ulonglong),
        ("event_name", ctypes.c_char * EVENT_NAME_LEN),
        ("additional_info", ctypes.c_char * EVENT_DATA_LEN),
        ("resv", ctypes.c_ubyte * EVENT_RESV_LEN),
    ]


class DcmiEventU(ctypes.Union):
    _fields_ = [("dms_event", DcmiDmsFaultEvent)]


class DcmiEvent(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),  # enum dcmi_event_type; 0 = fault event
        ("event_t", DcmiEventU),
    ]


# void (*dcmi_fault_event_callback)(struct dcmi_event *event); runs on a driver thread.
FaultEventCallback = ctypes.CFUNCTYPE(None, ctypes.POINTER(DcmiEvent))

# C name -> declaration, for the layout test (which compares every entry with the C compiler).
C_TYPES: dict[str, type[ctypes.Structure] | type[ctypes.Union]] = {
    "dcmi_chip_info": DcmiChipInfo,
    "dcmi_chip_info_v2": DcmiChipInfoV2,
    "dcmi_hbm_info": DcmiHbmInfo,
    "dcmi_ip_u_addr": DcmiIpUAddr,
    "dcmi_ip_addr": DcmiIpAddr,
    "dcmi_proc_mem_info": DcmiProcMemInfo,
    "dcmi_board_info": DcmiBoardInfo,
    "dcmi_spod_info": DcmiSpodInfo,
    "dcmi_die_id": DcmiDieId,
    "dcmi_urma_eid_in4": DcmiUrmaEidIn4,
    "dcmi_urma_eid_in6": DcmiUrmaEidIn6,
    "dcmi_urma_eid": DcmiUrmaEid,
    "dcmi_urma_eid_info": DcmiUrmaEidInfo,
    "dcmi_create_vdev_res_stru": DcmiCreateVdevResStru,
    "dcmi_create_vdev_out": DcmiCreateVdevOut,
    "dcmi_event_filter": DcmiEventFilter,
    "dcmi_dms_fault_event": DcmiDmsFaultEvent,
    "dcmi_event_u": DcmiEventU,
    "dcmi_event": DcmiEvent,
}


def c_text(raw: bytes | ctypes.Array[ctypes.c_ubyte] | ctypes.Array[ctypes.c_char]) -> str:
    """A fixed-size C char array as text: up to the first NUL, undecodable bytes replaced."""
    data = bytes(raw)
    end = data.find(b"\0")
    if end >= 0:
        data = data[:end]
    return data.decode("utf-8", errors="replace").strip()


# ---------------------------------------------------------------------- metrics (npu-exporter parity)

PROF_DATA_NUM = 3  # AGENTDRV_PROF_DATA_NUM: min, max, avg
UTIL_RESERVED_LEN = 8  # DCMI_UTIL_RESERVED_LEN


class DcmiEccInfo(ctypes.Structure):
    """dcmi_get_device_ecc_info."""

    _fields_ = [
        ("enable_flag", ctypes.c_int),
        ("single_bit_error_cnt", ctypes.c_uint),
        ("double_bit_error_cnt", ctypes.c_uint),
        ("total_single_bit_error_cnt", ctypes.c_uint),
        ("total_double_bit_error_cnt", ctypes.c_uint),
        ("single_bit_isolated_pages_cnt", ctypes.c_uint),
        ("double_bit_isolated_pages_cnt", ctypes.c_uint),
        ("single_bit_next_isolated_pages_cnt", ctypes.c_uint),
        ("double_bit_next_isolated_pages_cnt", ctypes.c_uint),
    ]


class DcmiPcieLinkBandwidthInfo(ctypes.Structure):
    """dcmi_get_pcie_link_bandwidth_info: `profiling_time` in (ms), each array (min, max, avg) out."""

    _fields_ = [
        ("profiling_time", ctypes.c_int),
        ("tx_p_bw", ctypes.c_uint * PROF_DATA_NUM),
        ("tx_np_bw", ctypes.c_uint * PROF_DATA_NUM),
        ("tx_cpl_bw", ctypes.c_uint * PROF_DATA_NUM),
        ("tx_np_lantency", ctypes.c_uint * PROF_DATA_NUM),  # sic, as spelled by the library
        ("rx_p_bw", ctypes.c_uint * PROF_DATA_NUM),
        ("rx_np_bw", ctypes.c_uint * PROF_DATA_NUM),
        ("rx_cpl_bw", ctypes.c_uint * PROF_DATA_NUM),
    ]


class DcmiMultiUtilizationInfo(ctypes.Structure):
    """dcmi_get_device_multi_utilization_rate: cube (aic), vector (aiv), AI core and overall (npu) in %."""

    _fields_ = [
        ("aic_util", ctypes.c_uint),
        ("aiv_util", ctypes.c_uint),
        ("aicore_util", ctypes.c_uint),
        ("npu_util", ctypes.c_uint),
        ("reserved", ctypes.c_uint * UTIL_RESERVED_LEN),
    ]


C_TYPES["dcmi_ecc_info"] = DcmiEccInfo
C_TYPES["dcmi_pcie_link_bandwidth_info"] = DcmiPcieLinkBandwidthInfo
C_TYPES["dcmi_multi_utilization_info"] = DcmiMultiUtilizationInfo


HCCS_MAX_PCS_NUM = 16  # HCCS_MAX_PCS_NUM
HCCS_RES_PCS_NUM = 64  # HCCS_RES_PCS_NUM
ELABEL_FIELD_LEN = 256  # MAX_LENGTH of struct dcmi_elabel_info


class DcmiHccsStatisticInfo(ctypes.Structure):
    """dcmi_get_device_info(DCMI_MAIN_CMD_HCCS, 3): 32-bit counters per PCS."""

    _fields_ = [
        ("tx_cnt", ctypes.c_uint * HCCS_MAX_PCS_NUM),
        ("rx_cnt", ctypes.c_uint * HCCS_MAX_PCS_NUM),
        ("crc_err_cnt", ctypes.c_uint * HCCS_MAX_PCS_NUM),
        ("retry_cnt", ctypes.c_uint * HCCS_MAX_PCS_NUM),
        ("reserved_field_cnt", ctypes.c_uint * HCCS_RES_PCS_NUM),
    ]


class DcmiHccsStatisticInfoU64(ctypes.Structure):
    """dcmi_get_device_info(DCMI_MAIN_CMD_HCCS, 5): the same counters, 64-bit."""

    _fields_ = [
        ("tx_cnt", ctypes.c_ulonglong * HCCS_MAX_PCS_NUM),
        ("rx_cnt", ctypes.c_ulonglong * HCCS_MAX_PCS_NUM),
        ("crc_err_cnt", ctypes.c_ulonglong * HCCS_MAX_PCS_NUM),
        ("retry_cnt", ctypes.c_ulonglong * HCCS_MAX_PCS_NUM),
        ("reserved", ctypes.c_ulonglong * HCCS_RES_PCS_NUM),
    ]


class DcmiHccsBandwidthInfo(ctypes.Structure):
    """dcmi_get_hccs_link_bandwidth_info: `profiling_time` (ms) in, the rates out."""

    _fields_ = [
        ("profiling_time", ctypes.c_int),
        ("total_txbw", ctypes.c_double),
        ("total_rxbw", ctypes.c_double),
        ("tx_bandwidth", ctypes.c_double * HCCS_MAX_PCS_NUM),
        ("rx_bandwidth", ctypes.c_double * HCCS_MAX_PCS_NUM),
    ]


class DcmiSioCrcErrStatisticInfo(ctypes.Structure):
    """dcmi_get_device_info(DCMI_MAIN_CMD_SIO, 0)."""

    _fields_ = [
        ("tx_error_count", ctypes.c_ushort),
        ("rx_error_count", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 8),
    ]


class DcmiMemoryInfo(ctypes.Structure):
    """struct dcmi_get_memory_info_stru (dcmi_get_device_memory_info_v3), 96 bytes on LP64."""

    _fields_ = [
        ("memory_size", ctypes.c_ulonglong),  # MB
        ("memory_available", ctypes.c_ulonglong),  # MB
        ("freq", ctypes.c_uint),
        ("hugepagesize", ctypes.c_ulong),
        ("hugepages_total", ctypes.c_ulong),
        ("hugepages_free", ctypes.c_ulong),
        ("utiliza", ctypes.c_uint),
        ("reserve", ctypes.c_ubyte * 60),
    ]


class DcmiElabelInfo(ctypes.Structure):
    _fields_ = [
        ("product_name", ctypes.c_char * ELABEL_FIELD_LEN),
        ("model", ctypes.c_char * ELABEL_FIELD_LEN),
        ("manufacturer", ctypes.c_char * ELABEL_FIELD_LEN),
        ("manufacturer_date", ctypes.c_char * ELABEL_FIELD_LEN),
        ("serial_number", ctypes.c_char * ELABEL_FIELD_LEN),
    ]


C_TYPES["dcmi_hccs_statistic_info"] = DcmiHccsStatisticInfo
C_TYPES["dcmi_hccs_statistic_info_u64"] = DcmiHccsStatisticInfoU64
C_TYPES["dcmi_hccs_bandwidth_info"] = DcmiHccsBandwidthInfo
C_TYPES["dcmi_sio_crc_err_statistic_info"] = DcmiSioCrcErrStatisticInfo
C_TYPES["dcmi_get_memory_info_stru"] = DcmiMemoryInfo
C_TYPES["dcmi_elabel_info"] = DcmiElabelInfo


# ---------------------------------------------------------------- vNPU queries (VDEV_MNG, the 310P)

VDEV_RES_NAME_LEN = 16  # DCMI_VDEV_RES_NAME_LEN
VDEV_SIZE = 20  # DCMI_VDEV_SIZE: the bytes the vnpu fields took from the computing resource's reserve


class DcmiBaseResource(ctypes.Structure):
    _fields_ = [
        ("token", ctypes.c_ulonglong),
        ("token_max", ctypes.c_ulonglong),
        ("task_timeout", ctypes.c_ulonglong),
        ("vfg_id", ctypes.c_uint),
        ("vip_mode", ctypes.c_ubyte),
        ("reserved", ctypes.c_ubyte * (VDEV_RESERVED_LEN - 1)),
    ]


class DcmiComputingResource(ctypes.Structure):
    """The vNPU's computing share; the three `vdev_*` fields are what the activity query fills."""

    _fields_ = [
        ("aic", ctypes.c_float),  # AI cores
        ("aiv", ctypes.c_float),
        ("dsa", ctypes.c_ushort),
        ("rtsq", ctypes.c_ushort),
        ("acsq", ctypes.c_ushort),
        ("cdqm", ctypes.c_ushort),
        ("c_core", ctypes.c_ushort),
        ("ffts", ctypes.c_ushort),
        ("sdma", ctypes.c_ushort),
        ("pcie_dma", ctypes.c_ushort),
        ("memory_size", ctypes.c_ulonglong),  # MB
        ("event_id", ctypes.c_uint),
        ("notify_id", ctypes.c_uint),
        ("stream_id", ctypes.c_uint),
        ("model_id", ctypes.c_uint),
        ("topic_schedule_aicpu", ctypes.c_ushort),
        ("host_ctrl_cpu", ctypes.c_ushort),
        ("host_aicpu", ctypes.c_ushort),
        ("device_aicpu", ctypes.c_ushort),
        ("topic_ctrl_cpu_slot", ctypes.c_ushort),
        ("vdev_aicore_utilization", ctypes.c_uint),  # %
        ("vdev_memory_total", ctypes.c_ulonglong),
        ("vdev_memory_free", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ubyte * (VDEV_RESERVED_LEN - VDEV_SIZE)),
    ]


class DcmiMediaResource(ctypes.Structure):
    _fields_ = [
        ("jpegd", ctypes.c_float),
        ("jpege", ctypes.c_float),
        ("vpc", ctypes.c_float),
        ("vdec", ctypes.c_float),
        ("pngd", ctypes.c_float),
        ("venc", ctypes.c_float),
        ("reserved", ctypes.c_ubyte * VDEV_RESERVED_LEN),
    ]


class DcmiVdevQueryInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * VDEV_RES_NAME_LEN),
        ("status", ctypes.c_uint),
        ("is_container_used", ctypes.c_uint),
        ("vfid", ctypes.c_uint),
        ("vfg_id", ctypes.c_uint),
        ("container_id", ctypes.c_ulonglong),
        ("base", DcmiBaseResource),
        ("computing", DcmiComputingResource),
        ("media", DcmiMediaResource),
    ]


class DcmiVdevQueryStru(ctypes.Structure):
    """dcmi_get_device_info(VDEV_MNG, GET_VDEV_RESOURCE / GET_VDEV_ACTIVITY): `vdev_id` in, the
    vNPU's resources (or its activity) out."""

    _fields_ = [
        ("vdev_id", ctypes.c_uint),
        ("query_info", DcmiVdevQueryInfo),
    ]


C_TYPES["dcmi_base_resource"] = DcmiBaseResource
C_TYPES["dcmi_computing_resource"] = DcmiComputingResource
C_TYPES["dcmi_media_resource"] = DcmiMediaResource
C_TYPES["dcmi_vdev_query_info"] = DcmiVdevQueryInfo
C_TYPES["dcmi_vdev_query_stru"] = DcmiVdevQueryStru
