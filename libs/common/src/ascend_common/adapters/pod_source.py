"""Where a service's pod cache gets the node's pods: the API server's list+watch, or the kubelet's /pods.

`PodSource` is what the consumers use (the device-plugin's PodFeed, the fault-manager's
reactor and hot reset); `PodCache` (kube/pod_watch.py, list+watch on the API server) and
`KubeletPodSource` (kubelet/pods.py, the kubelet's /pods polled, from a KubeletSource) both are
one. The choice is the settings' `--pod-source` (the reference's -getPodFromKubelet);
`PodSourceSettings` holds the flags both services share. Above both adapters, so that neither
imports the other's package.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ascend_common.adapters.kube.pod_index import OnChange
from ascend_common.adapters.kubelet.source import KubeletSource
from ascend_common.pods import SlimPod

if TYPE_CHECKING:  # the settings are read by a service that may run without a cluster (no client loaded)
    from ascend_common.adapters.kube.client import ApiClient

HOST_IP_ENV = "HOST_IP"  # the reference's (kube_connect.go HostIPEnv), from the downward API status.hostIP
KUBELET_PORT_ENV = "KUBELET_PORT"  # the reference's, default 10250
DEFAULT_KUBELET_PORT = 10250
SA_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class PodSource(Protocol):
    """The pods of one node as SlimPods, with ADDED/MODIFIED/DELETED callbacks (`on_change`)."""

    node_name: str
    on_change: list[OnChange]

    @property
    def synced(self) -> bool: ...

    def pods(self) -> list[SlimPod]: ...

    def get(self, namespace: str, name: str) -> SlimPod | None: ...

    def by_uid(self, uid: str) -> SlimPod | None: ...

    def __len__(self) -> int: ...

    async def wait_synced(self, timeout: float) -> bool: ...  # noqa: ASYNC109 - a bounded wait is the API

    async def start(self) -> None: ...

    async def stop(self, timeout: float = 5.0) -> None: ...  # noqa: ASYNC109

    async def relist(self, timeout: float = 10.0) -> bool: ...  # noqa: ASYNC109


class PodSourceSettings(BaseSettings):
    """The pod-source flags of the device-plugin and the fault-manager (a mixin of their settings)."""

    # The services' own model_config (and environment prefix) replaces this one.
    model_config = SettingsConfigDict(env_prefix="ASCEND_POD_SOURCE_", extra="forbid")

    pod_source: Literal["apiserver", "kubelet"] = Field(
        "apiserver",
        description="Where the node's pods come from: apiserver (a list+watch, spec.nodeName=<node>) or kubelet "
        "(the reference's getPodFromKubelet: GET https://<kubelet host>:<kubelet port>/pods every "
        "--kubelet-poll-period s with the service account's token, no pod list or watch on the API server; pod "
        "patches stay there).",
    )
    kubelet_host: str = Field(
        "",
        max_length=253,
        description="Kubelet source: the kubelet's IP address; empty: $HOST_IP (the reference's variable; the "
        "pod-source-kubelet component sets it from status.hostIP).",
    )
    kubelet_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Kubelet source: the kubelet's port; unset: $KUBELET_PORT (the reference's variable), else 10250.",
    )
    kubelet_ca: Path | None = Field(
        None,
        description="Kubelet source: the CA bundle (PEM) the kubelet's serving certificate is verified against; "
        "required unless --kubelet-insecure-skip-verify.",
    )
    kubelet_insecure_skip_verify: bool = Field(
        False,
        description="Kubelet source: do not verify the kubelet's certificate (what the reference always does); "
        "the token is then sent to whoever answers at that address. Logged as a warning at start.",
    )
    kubelet_token_file: Path = Field(
        SA_TOKEN,
        description="Kubelet source: the bearer token's file, re-read when it changes (projected tokens rotate).",
    )
    kubelet_poll_period: float = Field(
        5.0, ge=0.2, le=300, description="Kubelet source: seconds between two reads of /pods (the reference's 5 s)."
    )

    @model_validator(mode="after")
    def _check_pod_source(self) -> Self:
        if self.pod_source != "kubelet":
            return self
        if getattr(self, "kube", "api") == "offline":
            raise ValueError("--pod-source kubelet needs --kube api (offline mode reads no pods)")
        host = self.kubelet_host or os.environ.get(HOST_IP_ENV, "")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(
                f"--pod-source kubelet: the kubelet's address {host[:60]!r} (--kubelet-host, else ${HOST_IP_ENV}) "
                "is not an IP address"
            ) from None
        self.kubelet_host = host
        if self.kubelet_port is None:
            raw = os.environ.get(KUBELET_PORT_ENV, "")
            if raw and not (raw.isdigit() and 1 <= int(raw) <= 65535):
                raise ValueError(f"${KUBELET_PORT_ENV} {raw[:20]!r} is not a port (1-65535)")
            self.kubelet_port = int(raw) if raw else DEFAULT_KUBELET_PORT
        if self.kubelet_ca is None and not self.kubelet_insecure_skip_verify:
            raise ValueError(
                "--pod-source kubelet needs --kubelet-ca (the CA of the kubelet's serving certificate), or "
                "--kubelet-insecure-skip-verify true to trust whoever answers (the reference's behaviour)"
            )
        return self

    def kubelet_source(self) -> KubeletSource | None:
        """The kubelet to read pods from; None: the API server's list+watch."""
        if self.pod_source != "kubelet":
            return None
        return KubeletSource(
            host=self.kubelet_host,
            port=self.kubelet_port or DEFAULT_KUBELET_PORT,
            token_file=self.kubelet_token_file,
            ca_file=None if self.kubelet_insecure_skip_verify else self.kubelet_ca,
            insecure_skip_verify=self.kubelet_insecure_skip_verify,
            period_s=self.kubelet_poll_period,
        )


def build_pod_source(api: ApiClient, node_name: str, kubelet: KubeletSource | None) -> PodSource:
    """The API server's list+watch (`kubelet` None), or the kubelet's /pods."""
    if kubelet is None:
        from ascend_common.adapters.kube.pod_watch import PodCache

        return PodCache(api, node_name)
    from ascend_common.adapters.kubelet.pods import KubeletPodSource

    return KubeletPodSource(node_name, kubelet)
