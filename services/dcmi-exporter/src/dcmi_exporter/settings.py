"""The dcmi-exporter's settings: every flag also settable as DCMI_EXPORTER_<NAME>."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ascend_common.adapters.settings import HostPort, service_config
from pydantic import Field
from pydantic_settings import BaseSettings

MIN_EVENT_BUFFER = 16_384
DEFAULT_HCCN_TOOL = Path("/usr/local/Ascend/driver/tools/hccn_tool")  # the path the reference runs
# The name the reference dlopens (backends/dcmi/switch.py DEFAULT_SWITCH_LIB; not imported, so that
# the settings load no ctypes binding).
DEFAULT_SWITCH_LIB = "liblingqu-dcmi.so"


class ExporterSettings(BaseSettings):
    model_config = service_config("DCMI_EXPORTER_")

    backend: Literal["sim", "dcmi"] = Field("sim", description="Chip backend: the simulator or libdcmi.so.")
    profile: str = Field("910b-8", description="Simulator profile (sim backend only).")
    socket: Path = Field(Path("/run/ascend/dcmi-exporter.sock"), description="Unix socket of the local API (0660).")
    socket_group: str | None = Field(None, description="Group that owns the API socket (default: the process's).")
    metrics_addr: HostPort = Field("0.0.0.0:8082", description="HOST:PORT for /healthz, /readyz and /metrics.")
    token_file: Path | None = Field(None, description="Tokens for mutating calls; none: mutating calls are refused.")
    scenario: Path | None = Field(None, description="Scripted fault scenario, YAML (sim backend only).")
    library: Path = Field(Path("/usr/local/dcmi/libdcmi.so"), description="Path of libdcmi.so (dcmi backend).")
    time_scale: float = Field(1.0, gt=0, le=10_000, description="Simulated time runs this many times faster.")
    seed: int = Field(0, description="Seed of the simulator's telemetry.")
    poll_period: float = Field(
        1.0,
        ge=0.05,
        le=60,
        description=(
            "Seconds between two reads of every chip. Every chip is read on the same ticks, one period apart"
            " (one wake-up for all); a read an event or a command asks for does not move them, so the next tick"
            " may follow it sooner than a period."
        ),
    )
    call_timeout: float = Field(2.0, gt=0, le=60, description="Seconds before a library call is abandoned.")
    event_buffer: int = Field(MIN_EVENT_BUFFER, ge=MIN_EVENT_BUFFER, le=1_000_000, description="Events kept.")
    reset_timeout: float = Field(180.0, gt=0, le=3600, description="Seconds a reset may take to reach boot 16.")
    reset_poll_period: float = Field(1.0, gt=0, le=10, description="Seconds between boot-status reads in a reset.")
    hang_config: Path | None = Field(
        None,
        description=(
            "Hung-job detection config (the reference's hangDetectionConfig.json); none: the built-in"
            " defaults, detection on. An unreadable file or bad JSON: the defaults, logged."
        ),
    )
    hang_interval: float = Field(
        60.0,
        ge=0.01,
        le=3600,
        description="Seconds between two hung-job detection rounds (the thresholds are per round).",
    )
    host_proc: Path = Field(
        Path("/proc"), description="The host's /proc, for the CPU time of chip processes (hostPID)."
    )
    hccn_tool: Path = Field(DEFAULT_HCCN_TOOL, description="Path of hccn_tool, for network traffic (dcmi backend).")
    hccn_timeout: float = Field(
        10.0,
        gt=0,
        le=60,
        description=(
            "Seconds an hccn_tool run may take; then its whole process group is killed. A round of the tasks"
            " that run it (hang detection, UB / RoCE codes, RoCE counters) ends within the larger of its"
            " period and this."
        ),
    )
    npu_nic_mapping: Path | None = Field(
        None,
        description=(
            "The npu-nic mapping file (the reference's /user/mindx-dl/npu/npu-nic-mapping.json); the addresses"
            " of the host NICs it names are served in the node info (the 950's L3 rank level). None: no"
            " addresses. A missing or bad file: none, logged."
        ),
    )
    nic_refresh: float = Field(
        60.0, ge=1, le=3600, description="Seconds between two reads of the mapped NICs' addresses."
    )
    log_level: str = Field("INFO", description="Log level.")
    switch_faults: bool = Field(
        True,
        description=(
            "Watch the switch faults of an Atlas A3 node through liblingqu-dcmi.so (dcmi backend; other"
            " families never). A library that cannot be loaded or initialised: no switch faults, logged."
        ),
    )
    switch_library: Path = Field(
        Path(DEFAULT_SWITCH_LIB),
        description=(
            "Path of liblingqu-dcmi.so; a bare name is searched as the reference does (LD_LIBRARY_PATH, ld cache)."
        ),
    )
    switch_fault_interval: float = Field(
        300.0,
        ge=0.05,
        le=3600,
        description=(
            "Seconds between two queries of every switch fault while the library's subscription is live (the"
            " reference's 5 minutes; a round with no known switch fault is skipped). Without the subscription"
            " they are queried every poll period, as the reference queries them at every device-info round."
        ),
    )
    use_single_die_mode: bool = Field(
        False,
        description=(
            "Atlas A3: let one die of a chip go into a container alone (dcmi_set_multi_die_policy(1) at start);"
            " false sets (0), dies go together. Other families: nothing is set."
        ),
    )
    telemetry_period: float = Field(
        5.0,
        ge=0.05,
        le=3600,
        description=(
            "Seconds between two samples of the slow chip reads behind the extra metric families (voltage,"
            " AI-core frequency, vector / cube / overall utilisation, HBM ECC, PCIe bandwidth), in a task and"
            " a call pool of their own; a scrape shows the last sample."
        ),
    )
    containers_ttl: float = Field(
        120.0,
        ge=1,
        le=86400,
        description=(
            "Seconds the exporter keeps the container mapping the device plugin last PUT (`PUT /v1/containers`,"
            " the metrics' namespace / pod_name / container_name labels) without a newer one; then the labels"
            " are empty until the plugin sends again."
        ),
    )
    net_stats_period: float = Field(
        30.0,
        ge=0.05,
        le=3600,
        description=(
            "Seconds between two reads of every chip's RoCE / MAC counters (`hccn_tool -i <phy> -stat -g`, the"
            " shared runner and its timeout); a scrape shows the last read. 910 families only."
        ),
    )
