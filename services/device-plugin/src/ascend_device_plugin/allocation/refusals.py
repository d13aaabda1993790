"""Why the allocator refuses a request, in the domain's terms; server.py maps a refusal to a gRPC status."""

from __future__ import annotations

from enum import StrEnum


class Refusal(StrEnum):
    INVALID_REQUEST = "invalid-request"  # the kubelet's request (or a pod's annotation) names what cannot be
    NO_CLUSTER = "no-cluster"  # the path needs the API server (and the exporter) and the plugin runs without
    NO_POD = "no-pod"  # no pending pod carries an allocation for this request
    NO_INVENTORY = "no-inventory"  # no chip known yet
    API_SERVER = "api-server"  # the API server did not take the write the allocation depends on
    NO_CAPACITY = "no-capacity"  # the chip cannot hold the vNPU the pod asks for
    SOFT_SHARE = "soft-share"  # a soft-share pod whose quota file cannot be written as asked (nothing written)
    DRA_CLAIM = "dra-claim"  # `--kubelet-api both`: a DRA claim holds (or is being prepared on) the chip


class AllocationError(Exception):
    """A request the plugin refuses: the kind, the cause and, when one was chosen, the pod ("ns/name")."""

    def __init__(self, kind: Refusal, cause: str, *, pod: str | None = None) -> None:
        self.kind = kind
        self.cause = cause
        self.pod = pod
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"pod {self.pod}: {self.cause}" if self.pod is not None else self.cause
