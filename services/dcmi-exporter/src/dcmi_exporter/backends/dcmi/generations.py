"""The library's two generations of calls, and how each addresses a chip.

`dcmi_*` (v1) addresses a chip by (card, device); `dcmiv2_*` (v2, the 950 / A5 drivers) by its
logic id alone and knows no cards. The reference tries `dcmi_init` first and falls back to
`dcmiv2_init` (devmanager `DetectDcmiApiVersion`); from then on every call is of that generation
(`DcManager` / `DcV2Manager`). The backend names each call by its v1 name; `Generation.symbol`
gives the one to call. A v1 call with no v2 counterpart is "not supported" on v2, as the
reference's DeviceManagerV2 answers ("... is not supported in dcmiv2").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ascend_common.chips import ChipAddress

from dcmi_exporter.backends.errors import NotSupported

# v1 name -> v2 name; None: v2 has no such call. Calls the backend makes and this table lacks fail
# loudly (KeyError), so a new v1 call cannot silently go to the v1 symbol on a v2 library.
V2_SYMBOLS: Final[Mapping[str, str | None]] = {
    "dcmi_init": "dcmiv2_init",
    "dcmi_get_dcmi_version": "dcmiv2_get_dcmi_version",
    "dcmi_get_device_chip_info_v2": "dcmiv2_get_device_chip_info",  # same struct dcmi_chip_info_v2
    "dcmi_get_device_chip_info": None,
    "dcmi_get_device_board_info": "dcmiv2_get_device_board_info",
    "dcmi_get_product_type": None,
    "dcmi_get_netdev_brother_device": None,
    "dcmi_get_device_type": "dcmiv2_get_device_type",
    "dcmi_get_device_info": "dcmiv2_get_device_info",
    "dcmi_get_mainboard_id": "dcmiv2_get_mainboard_id",
    "dcmi_get_affinity_cpu_info_by_device_id": "dcmiv2_get_affinity_cpu_info_by_dev_id",
    "dcmi_get_device_ip": None,  # the reference: "dcmiv2_get_device_ip is no longer supported"
    "dcmi_get_device_health": "dcmiv2_get_device_health",
    "dcmi_get_device_errorcode_v2": "dcmiv2_get_device_error_code_list",
    "dcmi_get_device_network_health": "dcmiv2_get_device_network_health",
    "dcmi_get_device_temperature": "dcmiv2_get_device_temperature",
    "dcmi_get_device_power_info": "dcmiv2_get_device_power_info",
    "dcmi_get_device_hbm_info": "dcmiv2_get_device_hbm_info",
    "dcmi_get_device_utilization_rate": "dcmiv2_get_device_utilization_rate",
    "dcmi_get_device_resource_info": "dcmiv2_get_device_proc_mem_info",
    "dcmi_get_device_boot_status": "dcmiv2_get_device_boot_status",
    "dcmi_subscribe_fault_event": "dcmiv2_subscribe_fault_event",
    "dcmi_set_device_reset": "dcmiv2_reset_device",
    "dcmi_get_device_outband_channel_state": "dcmiv2_get_device_outband_channel_state",
    "dcmi_pre_reset_soc": "dcmiv2_pre_reset_device",
    "dcmi_rescan_soc": "dcmiv2_rescan_device",
    "dcmi_get_device_die_v2": "dcmiv2_get_device_die_id",  # same struct dcmi_die_id; v2 also knows DDIE
    "dcmi_get_urma_device_cnt": "dcmiv2_get_urma_device_cnt",
    "dcmi_get_eid_list_by_urma_dev_index": "dcmiv2_get_eid_list_by_urma_dev_index",  # same dcmi_urma_eid_info_t
    "dcmi_create_vdevice": None,  # DeviceManagerV2.CreateVirtualDevice: not supported
    "dcmi_set_destroy_vdevice": None,
    "dcmi_get_device_voltage": "dcmiv2_get_device_voltage",
    "dcmi_get_device_frequency": "dcmiv2_get_device_frequency",
    "dcmi_get_device_ecc_info": "dcmiv2_get_device_ecc_info",  # same struct dcmi_ecc_info
    "dcmi_get_pcie_link_bandwidth_info": "dcmiv2_get_pcie_link_bandwidth_info",
    "dcmi_get_device_multi_utilization_rate": "dcmiv2_get_device_multi_utilization_rate",
    # The reference asks v2 drivers neither (its DeviceManagerV2 reads no HCCS or DDR).
    "dcmi_get_hccs_link_bandwidth_info": None,
    "dcmi_get_device_memory_info_v3": None,
}

NO_CARD = -1  # the card and device id of a v2 chip (the reference's GetCardIDDeviceID answers -1, -1)
EVERY_CHIP = -1  # the id that subscribes to every chip's events


@dataclass(frozen=True)
class Generation:
    name: str  # the reference's dcmiApiVersion: "dcmi" or "dcmiv2"
    by_logic_id: bool

    def symbol(self, v1_name: str) -> str:
        """The symbol to call for `v1_name`; NotSupported when this generation has no such call."""
        if not self.by_logic_id:
            return v1_name
        v2 = V2_SYMBOLS[v1_name]
        if v2 is None:
            raise NotSupported(v1_name, message=f"{v1_name} has no dcmiv2 counterpart")
        return v2

    def address(self, chip: ChipAddress) -> tuple[int, ...]:
        """The leading arguments that name the chip."""
        return (chip.logic_id,) if self.by_logic_id else (chip.card_id, chip.device_id)

    def every_chip(self) -> tuple[int, ...]:
        return (EVERY_CHIP,) if self.by_logic_id else (EVERY_CHIP, EVERY_CHIP)


V1: Final = Generation("dcmi", by_logic_id=False)
V2: Final = Generation("dcmiv2", by_logic_id=True)
