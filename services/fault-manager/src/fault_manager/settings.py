"""The fault-manager's settings: every flag also settable as FAULT_MANAGER_<NAME>."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ascend_common.adapters.pod_source import PodSourceSettings
from ascend_common.adapters.settings import HostPort, service_config
from pydantic import Field, model_validator
from pydantic_settings import CliImplicitFlag

# The reference's -hotReset values (pkg/common/constants.go): HotResetClose, HotResetInfer, HotResetTrainOffLine.
HOT_RESET_OFF = -1
HOT_RESET_INFER = 0
HOT_RESET_TRAIN = 2


class FaultManagerSettings(PodSourceSettings):
    model_config = service_config("FAULT_MANAGER_")

    exporter_socket: Path = Field(Path("/run/ascend/dcmi-exporter.sock"), description="The exporter's API socket.")
    db: Path = Field(Path("/var/lib/ascend/fault-manager.db"), description="SQLite file (on a hostPath).")
    socket: Path = Field(Path("/run/ascend/fault-manager.sock"), description="Unix socket of the API (0660).")
    socket_group: str | None = Field(None, description="Group that owns the API socket.")
    node_name: str = Field("", max_length=253, description="This node's name (ConfigMap name, the pods of this node).")
    pod_name: str = Field(
        "", max_length=253, description="This pod's name, the object of its release Events; empty: $HOSTNAME."
    )
    kube: Literal["api", "offline"] = Field("api", description="api: write to the cluster; offline: files + API.")
    kubeconfig: Path | None = Field(
        None,
        description="A kubeconfig; default: KUBECONFIG (merged as kubectl does), the service account, ~/.kube/config.",
    )
    state_dir: Path = Field(Path("/var/lib/ascend/fault-manager"), description="Offline mode: objects as files.")
    policy_dir: Path | None = Field(None, description="faultCode.json etc. to use instead of the packaged tables.")
    time_scale: float = Field(1.0, gt=0, le=10_000, description="Policy time runs this many times faster (drills).")
    metrics_addr: HostPort = Field("0.0.0.0:8084", description="HOST:PORT for /healthz, /readyz and /metrics.")
    hot_reset: CliImplicitFlag[bool] = Field(
        False,
        description="Reset chips whose fault level calls for it (the reference's hotReset=2, in-place recovery); "
        "with it, GraceToleranceOn for training chips: a FreeRestartNPU chip in use stays Healthy.",
    )
    token_file: Path | None = Field(None, description="Holds the fault-manager's `reset` token for the exporter.")
    reset_mirror_dir: Path = Field(Path("/user/restore/reset"), description="Host mirror of reset ConfigMaps.")
    retention_days: float = Field(30.0, gt=0, le=3650, description="Fault events older than this are pruned.")
    policy_poll: float = Field(
        30.0,
        ge=1,
        le=3600,
        description="Seconds between reads of the policy ConfigMap while its watch has not listed it.",
    )
    refresh_period: float = Field(300.0, ge=1, le=3600, description="Rewrite the ConfigMap at least this often (s).")
    write_interval: float = Field(1.0, ge=0.05, le=60, description="At most one ConfigMap write per this many s.")
    log_level: str = Field("INFO", description="Log level.")
    fault_event_format: Literal["ours", "reference"] = Field(
        "ours",
        description="Fault Events: ours, NPUFaultOccurred / NPUFaultRecovered on the Node per code the policy "
        "applied; reference, the reference device plugin's (doWriteFaultToEvent): one Event per fault event, "
        "named <pod>.<unix ms><logic id> in kube-system, about this pod, reason Occur/Recovery/Notice, action "
        "the code's level, for alert rules written against the reference.",
    )

    hot_reset_mode: int | None = Field(
        None,
        description="The reference's -hotReset: -1 off; 0 inference (an idle faulty chip is reset when no pod "
        "and no process uses its group, no job ConfigMap; on an Atlas 300I Duo the whole card, and a chip "
        "whose cardmate is unhealthy is unhealthy too); 2 training (what --hot-reset turns on). "
        "Unset: 2 with --hot-reset, else -1.",
    )

    @model_validator(mode="after")
    def _one_hot_reset_mode(self) -> FaultManagerSettings:
        if self.hot_reset_mode not in (None, HOT_RESET_OFF, HOT_RESET_INFER, HOT_RESET_TRAIN):
            raise ValueError(
                f"--hot-reset-mode {self.hot_reset_mode}: the reference's modes are -1 (off), 0 (inference) "
                "and 2 (training)"
            )
        if self.hot_reset and self.hot_reset_mode not in (None, HOT_RESET_TRAIN):
            raise ValueError(
                f"--hot-reset is --hot-reset-mode {HOT_RESET_TRAIN}; it contradicts --hot-reset-mode "
                f"{self.hot_reset_mode}: give one of them"
            )
        return self

    @property
    def reset_mode(self) -> int:
        """The hot-reset mode in force, as the reference numbers it (HotResetClose/Infer/TrainOffLine)."""
        if self.hot_reset_mode is not None:
            return self.hot_reset_mode
        return HOT_RESET_TRAIN if self.hot_reset else HOT_RESET_OFF
