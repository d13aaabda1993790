"""Kubernetes access for the node services: client construction, the node's pod cache, and patches.

Everything that touches the official `kubernetes` client lives here, behind typed functions;
nothing here runs at import time.
"""

from ascend_common.kube.client import (
    DEFAULT_TIMEOUT_S,
    ApiClient,
    KubeApiError,
    KubeConfigError,
    KubeNotFound,
    KubeRejected,
    KubeRetriesExhausted,
    build_api_client,
    call,
    retrying,
)
from ascend_common.kube.patch import SlimNode, get_node, patch_node, patch_pod_annotations
from ascend_common.kube.pods import InvalidPod, PodCache, SlimPod, slim_pod

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ApiClient",
    "InvalidPod",
    "KubeApiError",
    "KubeConfigError",
    "KubeNotFound",
    "KubeRejected",
    "KubeRetriesExhausted",
    "PodCache",
    "SlimNode",
    "SlimPod",
    "build_api_client",
    "call",
    "get_node",
    "patch_node",
    "patch_pod_annotations",
    "retrying",
    "slim_pod",
]
