"""The families and label names a scrape shows per chip type, against npu-exporter's collectors.

The tables are taken from component/npu-exporter/collector/metrics/collector_for_*.go: each
BuildDesc name, its labels (CardLabel, or CardLabel plus the family's own) and the IsSupported /
supported-device maps that decide which chip type shows it. Each simulator runs with two fault
codes and a process on one chip, as the issue's comparison did, and a vNPU created on that chip and
held by one container (the device plugin's PUT), so that VnpuCollector's families, 310P only, show
where npu-exporter shows them. Families npu-exporter shows only for a container (npu_container_info,
container_npu_*) are the device plugin's (its /metrics).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.exporter import auth, running_exporter
from tests.support.waiting import START_S, WaitTimedOut, until

CARD = ("id", "model_name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name")
NAME = ("id", "name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name")


def card(*names: str) -> dict[str, tuple[str, ...]]:
    return dict.fromkeys(names, CARD)


NODE = {
    "machine_npu_nums": (),
    "machine_healthy_npu_nums": (),
    "machine_unhealthy_npu_nums": (),
    "machine_unknown_npu_nums": (),
    "node_base_info": ("exporterVersion", "driverVersion"),
    "npu_exporter_version_info": ("exporterVersion",),
}
# BaseInfoCollector (collector_for_npu.go), on every chip type; two codes: error_code and error_code_1.
BASE = {
    **card(
        "npu_chip_info_temperature", "npu_chip_info_power", "npu_chip_info_voltage",
        "npu_chip_info_aicore_current_freq", "npu_chip_info_health_status", "npu_chip_info_process_info_num",
        "npu_chip_info_error_code", "npu_chip_info_error_code_1",
        "npu_chip_info_utilization", "npu_chip_info_vector_utilization",
    ),
    "npu_chip_info_name": NAME,
    "npu_chip_info_serial_number": (*CARD, "serial_number"),
    "npu_chip_info_process_info": (*CARD, "process_id", "container_id"),
}  # fmt: skip
HBM = card(
    "npu_chip_info_hbm_total_memory", "npu_chip_info_hbm_used_memory", "npu_chip_info_hbm_utilization",
    "npu_chip_info_hbm_temperature", "npu_chip_info_hbm_bandwidth_utilization",
    "npu_chip_info_hbm_ecc_enable_flag", "npu_chip_info_hbm_ecc_single_bit_error_cnt",
    "npu_chip_info_hbm_ecc_double_bit_error_cnt", "npu_chip_info_hbm_ecc_total_single_bit_error_cnt",
    "npu_chip_info_hbm_ecc_total_double_bit_error_cnt", "npu_chip_info_hbm_ecc_single_bit_isolated_pages_cnt",
    "npu_chip_info_hbm_ecc_double_bit_isolated_pages_cnt",
)  # fmt: skip
# HccsCollector: ports 1..7 (PreCollect's begin index on the 910B and the A900 A3 super pod), then the totals.
HCCS = card(
    *(
        f"npu_chip_info_hccs_{kind}{port}"
        for kind in (
            "statistic_info_tx_cnt_", "statistic_info_rx_cnt_", "statistic_info_crc_err_cnt_",
            "bandwidth_info_tx_", "bandwidth_info_rx_",
        )
        for port in range(1, 8)
    ),
    "npu_chip_info_hccs_bandwidth_info_profiling_time", "npu_chip_info_hccs_bandwidth_info_total_tx",
    "npu_chip_info_hccs_bandwidth_info_total_rx",
)  # fmt: skip
SIO = card("npu_chip_info_sio_crc_tx_err_cnt", "npu_chip_info_sio_crc_rx_err_cnt")
DDR = card("npu_chip_info_total_memory", "npu_chip_info_used_memory")
PCIE = {
    f"npu_chip_info_pcie_{kind}_bw": (*CARD, "pcie_bw_type")
    for kind in ("tx_p", "tx_np", "tx_cpl", "rx_p", "rx_np", "rx_cpl")
}
# RoceCollector, OpticalCollector and NetworkCollector on a training card (not the 950).
ROCE = card(
    "npu_chip_mac_rx_pause_num", "npu_chip_mac_tx_pause_num", "npu_chip_mac_rx_pfc_pkt_num",
    "npu_chip_mac_tx_pfc_pkt_num", "npu_chip_mac_rx_bad_pkt_num", "npu_chip_mac_tx_bad_pkt_num",
    "npu_chip_mac_tx_bad_oct_num", "npu_chip_mac_rx_bad_oct_num", "npu_chip_info_rx_fcs_num",
    "npu_chip_roce_rx_all_pkt_num", "npu_chip_roce_tx_all_pkt_num", "npu_chip_roce_rx_err_pkt_num",
    "npu_chip_roce_tx_err_pkt_num", "npu_chip_roce_rx_cnp_pkt_num", "npu_chip_roce_tx_cnp_pkt_num",
    "npu_chip_roce_new_pkt_rty_num", "npu_chip_roce_unexpected_ack_num", "npu_chip_roce_out_of_order_num",
    "npu_chip_roce_verification_err_num", "npu_chip_roce_qp_status_err_num", "npu_chip_info_rx_ecn_num",
    "npu_chip_optical_state", "npu_chip_optical_vcc", "npu_chip_optical_temp",
    *(f"npu_chip_optical_{d}_power_{i}" for d in ("tx", "rx") for i in range(4)),
    "npu_chip_info_link_status", "npu_chip_link_speed", "npu_chip_link_up_num",
    "npu_chip_info_bandwidth_tx", "npu_chip_info_bandwidth_rx",
)  # fmt: skip
UB_LABELS = (*CARD, "udie", "port")
# UbCollector (collector_for_ub.go), the 950 only: a family per counter of a UB port, labels
# CardLabel + udie + port; the UBoE ones (core_mib_*) on a UBoE port only.
UB = {
    f"npu_chip_info_{name}": UB_LABELS
    for name in (
        *(f"{kind}_{way}" for way in ("rx", "tx") for kind in (
            "ub_ipv4_pkt_cnt", "ub_ipv6_pkt_cnt", "unic_ipv4_pkt_cnt", "unic_ipv6_pkt_cnt", "ub_compact_pkt_cnt",
            "ub_umoc_ctph_cnt", "ub_umoc_ntph_cnt", "ub_mem_pkt_cnt", "unknown_pkt_cnt", "drop_ind_cnt",
            "err_ind_cnt", "out_err_cnt", "length_err_cnt",
        )),
        "to_host_pkt_cnt_rx", "to_imp_pkt_cnt_rx", "to_mar_pkt_cnt_rx", "to_link_pkt_cnt_rx", "to_noc_pkt_cnt_rx",
        "route_err_cnt_rx", "rx_busi_flit_num", "rx_send_ack_flit",
        "lpbk_ind_cnt_tx", "tx_busi_flit_num", "tx_recv_ack_flit",
        "retry_req_sum", "retry_ack_sum", "crc_error_sum",
    )
}  # fmt: skip
UBOE = {
    f"npu_chip_info_core_mib_{name}": UB_LABELS
    for name in ("rxpausepkts", "txpausepkts", "rxpfcpkts", "txpfcpkts", "rxbadpkts", "txbadpkts",
                 "rxbadoctets", "txbadoctets")
}  # fmt: skip
# NetworkCollector on the 950 (initNpuNetWorkDesc): per port, every 950 board but the Atlas 350 1P.
UB_NETWORK = dict.fromkeys(
    (
        "npu_chip_info_link_status",
        "npu_chip_info_bandwidth_tx",
        "npu_chip_info_bandwidth_rx",
        "npu_chip_info_link_speed",
    ),
    UB_LABELS,
)
# OpticalCollector on the 950 (initNpuOpticalDesc): per port, off the Atlas 350 and Atlas 950 boards.
UB_OPTICAL = {
    "npu_chip_info_optical_index_num": UB_LABELS,
    **{f"npu_chip_info_optical_{d}_power_{i}": UB_LABELS for d in ("tx", "rx") for i in range(4)},
}
# VnpuCollector (collector_for_vnpu.go), the 310P only: CardLabel with vdie_id and pcie_bus_info
# replaced by v_dev_id and aicore_count, then is_virtual.
VNPU = dict.fromkeys(
    ("vnpu_pod_aicore_utilization", "vnpu_pod_total_memory", "vnpu_pod_used_memory"),
    ("id", "model_name", "v_dev_id", "aicore_count", "namespace", "pod_name", "container_name", "is_virtual"),
)
# A vNPU template each family may create (ascend_common.vnpu), for the profiles whose chips split.
VNPU_TEMPLATES = {"310p-4": "vir02", "910b-8": "vir05_1c_16g"}
TRAINING_910 = {
    **NODE, **BASE, **HBM, **ROCE,
    "machine_card_nums": (),
    **card("npu_chip_info_network_status", "npu_chip_info_overall_utilization", "npu_chip_info_cube_utilization"),
}  # fmt: skip

REFERENCE: dict[str, dict[str, tuple[str, ...]]] = {
    "910b-8": {**TRAINING_910, **HCCS, **PCIE},
    "a3-16": {**TRAINING_910, **HCCS, **SIO},
    # No HBM, overall or cube utilisation, network status (not a training card: NotReport), RoCE.
    "310p-4": {
        **NODE, **BASE, **DDR, **VNPU,
        "machine_card_nums": (),
        "npu_chip_info_product_type": (*CARD, "product_type"),
    },
    # An Atlas 850 (main board 0x25, with a UBoE device: UBoE ports): no PCIe
    # (supportedPcieA5MainBoards), no card count.
    "a5-8": {
        **NODE, **BASE, **HBM, **SIO, **UB, **UBOE, **UB_NETWORK, **UB_OPTICAL,
        **card("npu_chip_info_network_status", "npu_chip_info_overall_utilization"),
    },
}  # fmt: skip
PERIODS = ("--telemetry-period", "0.2", "--net-stats-period", "0.2")


def served(text: str) -> dict[str, tuple[str, ...]]:
    """family -> its label names, from the families that have a series."""
    out: dict[str, tuple[str, ...]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith("dcmi_exporter_"):  # ours, listed in docs/compatibility.md
                out[sample.name] = tuple(sorted(sample.labels))
    return out


@pytest.mark.parametrize("profile", sorted(REFERENCE))
async def test_families_and_labels_per_chip_type_are_npu_exporters(profile: str, tmp_path: Path) -> None:
    with running_exporter(tmp_path, *PERIODS, profile=profile) as ep:
        async with ep.client() as client:
            for code in ("80E01801", "80CB8009"):
                resp = await client.post(
                    "/v1/sim/chips/0/faults", json={"code": code, "severity": 1}, headers=auth("sim")
                )
                assert resp.status_code < 300, resp.text
            resp = await client.put(
                "/v1/sim/chips/0/processes",
                json={"processes": [{"pid": 7, "memory_bytes": 3 << 30}]},
                headers=auth("sim"),
            )
            assert resp.status_code < 300, resp.text
            if profile in VNPU_TEMPLATES:  # a held vNPU: the 310P shows its families, another type none
                resp = await client.post(
                    "/v1/chips/0/vnpus", json={"template": VNPU_TEMPLATES[profile]}, headers=auth("vnpu")
                )
                assert resp.status_code < 300, resp.text
                holder = {"namespace": "ns", "pod": "infer-0", "container": "c"}
                mapping = {"chips": [], "vnpus": [{"vdev_id": resp.json()["vdev_id"], "containers": [holder]}]}
                resp = await client.put("/v1/containers", json=mapping, headers=auth("containers"))
                assert resp.status_code < 300, resp.text
        expected = {name: tuple(sorted(labels)) for name, labels in REFERENCE[profile].items()}

        last: list[dict[str, tuple[str, ...]]] = [{}]

        def complete() -> bool | None:
            last[0] = served(httpx.get(ep.metrics_url + "/metrics").text)
            return True if set(expected) <= set(last[0]) else None

        with contextlib.suppress(WaitTimedOut):  # the comparison below says what is missing
            await until(complete, START_S, f"every family npu-exporter shows on {profile}")
        got = last[0]
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    assert not missing, f"{profile}: npu-exporter shows, we do not: {missing}"
    assert not extra, f"{profile}: we show, npu-exporter does not: {extra}"
    wrong = {name: (got[name], labels) for name, labels in expected.items() if got[name] != labels}
    assert not wrong, f"{profile}: label names differ (ours, npu-exporter's): {wrong}"
