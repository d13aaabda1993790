"""The device-plugin's settings: every flag also settable as ASCEND_DEVICE_PLUGIN_<NAME>.

Names follow the reference's flags where one exists (volcanoType, presetVirtualDevice,
shareDevCount, listWatchPeriod, useAscendDocker) in kebab case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from ascend_common.adapters.kubelet.constants import (
    DEFAULT_KUBELET_PLUGINS_DIR,
    DEFAULT_PLUGIN_DIR,
    DEFAULT_PLUGINS_REGISTRY_DIR,
    DEFAULT_PODRESOURCES_SOCKET,
)
from ascend_common.adapters.pod_source import PodSourceSettings
from ascend_common.adapters.settings import HostPort, service_config
from pydantic import Field, field_validator, model_validator
from pydantic_settings import CliImplicitFlag

from ascend_device_plugin.resources.health import FAULTS
from ascend_device_plugin.resources.mixed import check_flags
from ascend_device_plugin.softshare.switch import check_switch, soft_share_on


class PluginSettings(PodSourceSettings):
    model_config = service_config("ASCEND_DEVICE_PLUGIN_")

    exporter_socket: Path = Field(Path("/run/ascend/dcmi-exporter.sock"), description="The exporter's API socket.")
    plugin_dir: Path = Field(Path(DEFAULT_PLUGIN_DIR), description="The kubelet's device-plugin directory.")
    podresources_socket: Path = Field(
        Path(DEFAULT_PODRESOURCES_SOCKET), description="The kubelet's PodResources socket."
    )
    node_name: str = Field("", max_length=253, description="This node's name (the pod cache's field selector).")
    fault_manager_socket: Path | None = Field(None, description="The fault-manager's API socket (verdicts).")
    kube: Literal["api", "offline"] = Field(
        "api", description="api: talk to the cluster; offline: no pods, no patches."
    )
    kubeconfig: Path | None = Field(
        None,
        description="A kubeconfig; default: KUBECONFIG (merged as kubectl does), the service account, ~/.kube/config.",
    )
    volcano_type: CliImplicitFlag[bool] = Field(
        False, description="Allocate the devices Volcano chose (pod annotations)."
    )
    preset_virtual_device: bool = Field(True, description="Static vNPUs; false: dynamic vNPU mode (npu-core).")
    enable_slow_node: bool = Field(
        False,
        description="Give each container PERF_DUMP_PATH / PERF_DUMP_CONFIG from ConfigMap "
        "kube-system/steptime-dtpgroup (the reference's enableSlowNode).",
    )
    retry_update_count: int = Field(
        3,
        ge=1,
        le=20,
        description="Volcano: tries to mark the chosen pod taken before Allocate fails (the "
        "reference's RetryUpdateCount).",
    )
    update_pod_wait_time: float = Field(
        0.2,
        gt=0,
        le=5,
        description="Volcano: seconds between those tries, growing with jitter (UpdatePodWaitTime).",
    )
    share_dev_count: int = Field(
        1,
        ge=1,
        le=100,
        description="310P/310B sharing: advertise each chip N times (other families: once, with a warning); "
        "100 with --soft-share-dev-config-dir: soft share.",
    )
    soft_share_dev_config_dir: Path | None = Field(
        None,
        description="Soft share (Volcano chip1softsharedev; the reference's softShareDevConfigDir): with "
        "--share-dev-count 100 and --volcano-type, each chip is offered as 100 ids <name>-<phy>-0..99. "
        "An absolute path whose parent exists.",
    )
    soft_share_npu_info_dir: Path = Field(
        Path("/etc/enpu"),
        description="Soft share: the host directory of the pods' quota files, "
        "<dir>/<namespace>.<job>/<phy>_<vid>/npu_info.config (the reference hard-codes /etc/enpu). It must "
        "exist; each pod's directory is mounted read-only at /etc/enpu/vcann-rt/ in its containers.",
    )
    use_ascend_docker: bool = Field(True, description="Ascend Docker Runtime mode; false: mount /dev/davinci*.")
    token_file: Path | None = Field(None, description="Holds the plugin's `vnpu` token (dynamic vNPU mode).")
    list_watch_period: float = Field(
        5.0, gt=0, le=600, description="Resync period of ListAndWatch (sends only on change)."
    )
    exporter_grace: float = Field(
        30.0, ge=0, le=3600, description="Seconds without the exporter before all go Unhealthy."
    )
    vnpu_gc_period: float = Field(
        30.0, gt=0, le=3600, description="Dynamic vNPU mode: seconds between sweeps for vNPUs no pod holds."
    )
    ras_net_root_path: Path | None = Field(
        None,
        description="The RAS network-fault root (the reference's RAS_NET_ROOT_PATH): on a 950 server or pod node, "
        "every 30 s, once <root>/cluster/super-pod-<id>/ exists, the node type's HCCL topology file is copied to "
        "its rack-<rack>/topo_<server index>.json. Unset: no rack topology.",
    )
    metrics_addr: HostPort = Field("0.0.0.0:8083", description="HOST:PORT for /healthz, /readyz and /metrics.")
    require_root_owned: bool = Field(True, description="Refuse a plugin dir or kubelet.sock not owned by root.")
    max_message_bytes: int = Field(4 << 20, ge=64 << 10, le=64 << 20, description="gRPC message size cap.")
    max_streams: int = Field(16, ge=1, le=1024, description="Concurrent gRPC streams per connection.")
    log_level: str = Field("INFO", description="Log level.")
    use_310p_mixed_insert: CliImplicitFlag[bool] = Field(
        False,
        description="310P mixed insert (the reference's use310PMixedInsert): each chip is advertised under its "
        "card's product, huawei.com/Ascend310P-VPro, -V or -IPro (Atlas 300V Pro, 300V, 300I Pro), as "
        "<resource>-<phy>, and containers get /dev/davinci* mounted (as with --use-ascend-docker false). "
        "Refuses --volcano-type, --share-dev-count above 1, and a node with any other product.",
    )
    container_metrics_period: float = Field(
        15.0,
        ge=0,
        le=3600,
        description="Seconds between samples of npu-exporter's container families on /metrics "
        "(container_npu_utilization, container_npu_total_memory, container_npu_used_memory, npu_container_info): "
        "the kubelet's PodResources List and the exporter's chips, each within min(5 s, period); a scrape "
        "serves the last sample. 0: off.",
    )
    # ---- Dynamic Resource Allocation (issue 27) -----------------------------------------------
    kubelet_api: Literal["device-plugin", "dra", "both"] = Field(
        "device-plugin",
        description="The kubelet API the chips are offered through: device-plugin (huawei.com/<type> resources), "
        "dra (a DRA driver npu.huawei.com: ResourceSlices, NodePrepareResources), or both at once.",
    )
    plugins_registry_dir: Path = Field(
        Path(DEFAULT_PLUGINS_REGISTRY_DIR),
        description="DRA: the kubelet plugin watcher's directory, where the registration socket "
        "npu.huawei.com-reg.sock is created.",
    )
    kubelet_plugins_dir: Path = Field(
        Path(DEFAULT_KUBELET_PLUGINS_DIR),
        description="DRA: the kubelet's plugins directory; the driver serves <dir>/npu.huawei.com/dra.sock and "
        "keeps its checkpoint of prepared claims there.",
    )
    cdi_root: Path = Field(
        Path("/var/run/cdi"), description="DRA: where the per-claim CDI specs are written (the runtime's CDI dir)."
    )
    dra_noexecute_levels: str = Field(
        "",
        description="DRA, where the apiserver keeps device taints: the faults (comma-separated fault levels, "
        "e.g. SeparateNPU, or card_drop, unknown, exporter_lost, library_unhealthy) whose "
        "npu.huawei.com/unhealthy taint is NoExecute (the taint-eviction controller deletes the pods of "
        "claims on the chip) instead of NoSchedule. Empty: none, MindCluster's job-level recovery decides "
        "when a job leaves its chips.",
    )

    dra_allocate_hold_s: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="--kubelet-api both: seconds a chip the device plugin's Allocate handed out stays out of the "
        "DRA slice (and refuses claims) while no pod's annotation names it yet; once one does, the annotation "
        "holds it until the pod finishes.",
    )

    @field_validator("dra_noexecute_levels")
    @classmethod
    def _check_noexecute_levels(cls, value: str) -> str:
        unknown = [level for level in noexecute_levels(value) if level not in FAULTS]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
        return value

    @model_validator(mode="after")
    def _check_share(self) -> Self:
        """The reference's start checks of the share flags (main.go), so that a bad set exits 2."""
        reason = check_switch(
            self.share_dev_count, self.soft_share_dev_config_dir, volcano_type=self.volcano_type,
            preset_virtual_device=self.preset_virtual_device,
        )  # fmt: skip
        if reason is None:
            reason = check_flags(
                self.use_310p_mixed_insert, volcano_type=self.volcano_type, share_count=self.share_dev_count,
                preset_virtual_device=self.preset_virtual_device,
            )  # fmt: skip
        if reason is not None:
            raise ValueError(reason)
        root = self.ras_net_root_path
        # GetRasNetRootPath: the root must be a directory (the reference then skips the task; we refuse to start).
        if root is not None and not root.is_dir():
            raise ValueError(f"--ras-net-root-path {str(root)!r} is not a directory")
        directory = self.soft_share_dev_config_dir
        # The reference's RealDirChecker on the parent: the directory itself is made when first needed.
        if directory is not None and not directory.parent.is_dir():
            raise ValueError(f"--soft-share-dev-config-dir {str(directory)!r}: its parent is not a directory")
        return self

    @property
    def soft_share(self) -> bool:
        """Soft share is on (the reference's common.IsSupportSoftShareDevice)."""
        return soft_share_on(self.share_dev_count, self.soft_share_dev_config_dir)

    @property
    def runtime_mounts(self) -> bool:
        """The Ascend Docker Runtime mounts the chips (env vars only); the reference's mixed insert
        never uses it (main.go `setUseAscendDocker`), so the plugin mounts the device nodes then."""
        return self.use_ascend_docker and not self.use_310p_mixed_insert


def noexecute_levels(value: str) -> frozenset[str]:
    """--dra-noexecute-levels as a set: the comma-separated items, blanks ignored."""
    return frozenset(item.strip() for item in value.split(",") if item.strip())
