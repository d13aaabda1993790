"""Deterministic, plausible telemetry for simulated chips.

Values are pure functions of (seed, chip, sim time, processes): reads from many threads never
disturb a shared random generator, and two runs with one seed show the same numbers.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ascend_common.chip_traits import MetricGroup, families_with
from ascend_common.schemas.exporter import Vnpu

from dcmi_exporter.backends.base import (
    HCCS_PORTS,
    PCIE_KINDS,
    HbmEcc,
    HccsBandwidth,
    HccsStats,
    Memory,
    PcieBandwidth,
    VnpuActivity,
)
from dcmi_exporter.backends.sim.profiles import Profile

TEMP_MIN_C = 35
TEMP_MAX_C = 75
_MB = 1024 * 1024


@dataclass(frozen=True)
class ChipTraits:
    """Per-chip constants drawn once from the seed."""

    base_temp_c: float  # idle temperature
    phase: float  # offsets so that chips do not drift in lockstep
    phase2: float
    idle_hbm_mb: int  # firmware and runtime reservations of an idle chip


def traits_for(seed: int, logic_ids: list[int]) -> dict[int, ChipTraits]:
    rng = random.Random(seed)
    out: dict[int, ChipTraits] = {}
    for logic in sorted(logic_ids):
        out[logic] = ChipTraits(
            base_temp_c=rng.uniform(38.0, 46.0),
            phase=rng.uniform(0.0, 2 * math.pi),
            phase2=rng.uniform(0.0, 2 * math.pi),
            idle_hbm_mb=rng.randint(200, 480),
        )
    return out


def aicore_util(traits: ChipTraits, t: float, process_count: int) -> int:
    """0 when idle; busier with more processes, with a small wobble."""
    if process_count == 0:
        return 0
    wobble = 6.0 * math.sin(t / 7.0 + traits.phase)
    return int(_clamp(45.0 + 15.0 * process_count + wobble, 1.0, 100.0))


def hbm_used_mb(traits: ChipTraits, total_mb: int, process_bytes: list[int]) -> int:
    used = traits.idle_hbm_mb + sum(b // _MB for b in process_bytes)
    return min(used, total_mb)


def temperature_c(traits: ChipTraits, t: float, util_pct: int) -> int:
    drift = 2.0 * math.sin(t / 97.0 + traits.phase) + 0.6 * math.sin(t / 13.0 + traits.phase2)
    return round(_clamp(traits.base_temp_c + 0.22 * util_pct + drift, TEMP_MIN_C, TEMP_MAX_C))


def power_w(profile: Profile, traits: ChipTraits, t: float, util_pct: int) -> float:
    span = profile.power_max_w - profile.power_idle_w
    wobble = 0.02 * span * math.sin(t / 5.0 + traits.phase2)
    value = profile.power_idle_w + span * util_pct / 100.0 + wobble
    # The library reports 0.1 W units.
    return round(_clamp(value, profile.power_idle_w * 0.95, profile.power_max_w), 1)


def _clamp(value: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, value))


# ---------------------------------------------------------------------- metrics (npu-exporter parity)

# The families npu-exporter asks each of (its supportedHbmDevices and supportedPcieDevices).
HBM_FAMILIES = families_with(lambda row: MetricGroup.HBM in row.metrics)
PCIE_FAMILIES = families_with(lambda row: MetricGroup.PCIE in row.metrics)
# The families a driver answers HCCS counters, SIO counters, DDR memory for, as npu-exporter asks them.
HCCS_FAMILIES = families_with(lambda row: MetricGroup.HCCS in row.metrics)
SIO_FAMILIES = families_with(lambda row: MetricGroup.SIO in row.metrics)
# DDR memory: the chips without on-chip memory, the 310 cards (the simulated 910A answers none).
DDR_FAMILIES = families_with(lambda row: not row.on_chip_memory)


def hbm_ecc(traits: ChipTraits) -> HbmEcc:
    """A healthy chip's ECC: detection on, a few corrected single-bit errors, nothing else."""
    singles = int(traits.base_temp_c) % 5
    return HbmEcc(
        enable_flag=1,
        single_bit_error_cnt=singles,
        double_bit_error_cnt=0,
        total_single_bit_error_cnt=singles,
        total_double_bit_error_cnt=0,
        single_bit_isolated_pages_cnt=0,
        double_bit_isolated_pages_cnt=0,
    )


def pcie_bandwidth(util_pct: int, phy_id: int) -> PcieBandwidth:
    """(min, max, avg) MB/ms per direction and kind, busier with the AI core."""
    rates: dict[str, tuple[int, int, int]] = {}
    for i, kind in enumerate(PCIE_KINDS):
        avg = 10 * util_pct + 100 * i + phy_id
        rates[kind] = (avg // 2, avg * 2, avg)
    return PcieBandwidth(rates=rates)


def roce_stats(tx_pkts: int, rx_pkts: int) -> dict[str, int]:
    """A clean RoCE port's `-stat -g` counters: everything moves, nothing fails."""
    return {
        "roce_tx_all_pkt_num": tx_pkts,
        "roce_rx_all_pkt_num": rx_pkts,
        "roce_tx_err_pkt_num": 0,
        "roce_rx_err_pkt_num": 0,
        "roce_tx_cnp_pkt_num": tx_pkts // 1000,
        "roce_rx_cnp_pkt_num": rx_pkts // 1000,
        "mac_tx_mac_pause_num": 0,
        "mac_rx_mac_pause_num": 0,
        "mac_tx_pfc_pkt_num": 0,
        "mac_rx_pfc_pkt_num": 0,
        "mac_tx_bad_pkt_num": 0,
        "mac_rx_bad_pkt_num": 0,
        "mac_tx_bad_oct_num": 0,
        "mac_rx_bad_oct_num": 0,
        "mac_rx_fcs_err_pkt_num": 0,
        "roce_new_pkt_rty_num": 0,
        "roce_out_of_order_num": 0,
        "roce_qp_status_err_num": 0,
        "roce_unexpected_ack_num": 0,
        "roce_verification_err_num": 0,
        "roce_ecn_db_num": 0,
    }


def optical(traits: ChipTraits, link_down: bool) -> dict[str, float]:
    rx = -40.0 if link_down else round(-2.0 + traits.phase / 10, 2)
    return {
        "present": 1.0,
        "Vcc": 3.3,
        "temperature": round(traits.base_temp_c - 5, 1),
        **{f"Tx_Power{i}": round(0.5 + traits.phase2 / 10, 2) for i in range(4)},
        **{f"Rx_Power{i}": rx for i in range(4)},
    }


def hccs_stats(util_pct: int, phy_id: int, t: float) -> HccsStats:
    """Port counters that grow with time and load; a clean link has no CRC errors."""
    base = int(t) * (10 + util_pct) + 1000 * phy_id
    return HccsStats(
        tx_cnt=tuple(base + 7 * port for port in range(HCCS_PORTS)),
        rx_cnt=tuple(base + 5 * port for port in range(HCCS_PORTS)),
        crc_err_cnt=(0,) * HCCS_PORTS,
    )


def hccs_bandwidth(util_pct: int, profiling_time_ms: int) -> HccsBandwidth:
    per_port = round(util_pct * 0.25, 2)
    return HccsBandwidth(
        profiling_time_ms=profiling_time_ms,
        total_tx=per_port * (HCCS_PORTS - 1),
        total_rx=per_port * (HCCS_PORTS - 1),
        tx=(per_port,) * HCCS_PORTS,
        rx=(per_port,) * HCCS_PORTS,
    )


def ddr_memory(total_mb: int, used_mb: int) -> Memory:
    return Memory(total_mb=total_mb, available_mb=total_mb - used_mb)


def serial_number(card_id: int, logic_id: int) -> str:
    """A stable, card-like serial: per card where the chips have one, else per chip."""
    return f"SIM{(card_id if card_id >= 0 else logic_id):08d}"


def vnpu_activity(vnpu: Vnpu, chip_aicore: int, chip_memory_mb: int, traits: ChipTraits, util_pct: int) -> VnpuActivity:
    """A vNPU's share of its chip: memory (KB, npu-exporter's unit for it) in proportion to its AI
    cores, part of it reserved even when idle, and the chip's AI-core load."""
    total_kb = chip_memory_mb * 1024 * vnpu.aicore // max(chip_aicore, 1)
    reserved_kb = min(total_kb, traits.idle_hbm_mb * 1024 * vnpu.aicore // max(chip_aicore, 1))
    used_kb = min(total_kb, reserved_kb + total_kb * util_pct // 200)
    return VnpuActivity(
        vdev_id=vnpu.vdev_id,
        aicore=float(vnpu.aicore),
        aicore_pct=util_pct,
        total_memory=total_kb,
        used_memory=used_kb,
    )
