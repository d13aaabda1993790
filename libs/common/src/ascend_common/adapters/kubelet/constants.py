"""Names and paths of the kubelet APIs (contract section 1) that are part of the wire protocol."""

from __future__ import annotations

from pathlib import Path
from typing import Final

VERSION: Final = "v1beta1"
HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"

DEFAULT_PLUGIN_DIR: Final = Path("/var/lib/kubelet/device-plugins")
# The kubelet's Registration socket, in the plugin dir; plugin endpoints are file names in that dir.
KUBELET_SOCKET: Final = "kubelet.sock"
DEFAULT_KUBELET_SOCKET_PATH: Final = DEFAULT_PLUGIN_DIR / KUBELET_SOCKET

# Mount the directory, not the socket: the kubelet re-creates the socket when it restarts.
DEFAULT_PODRESOURCES_DIR: Final = Path("/var/lib/kubelet/pod-resources")
DEFAULT_PODRESOURCES_SOCKET: Final = DEFAULT_PODRESOURCES_DIR / KUBELET_SOCKET

# The proto package is part of every method path, so these are fixed by the kubelet, not by us.
REGISTRATION_SERVICE: Final = f"{VERSION}.Registration"
DEVICE_PLUGIN_SERVICE: Final = f"{VERSION}.DevicePlugin"
REGISTER_METHOD: Final = f"/{REGISTRATION_SERVICE}/Register"
GET_DEVICE_PLUGIN_OPTIONS_METHOD: Final = f"/{DEVICE_PLUGIN_SERVICE}/GetDevicePluginOptions"
LIST_AND_WATCH_METHOD: Final = f"/{DEVICE_PLUGIN_SERVICE}/ListAndWatch"
GET_PREFERRED_ALLOCATION_METHOD: Final = f"/{DEVICE_PLUGIN_SERVICE}/GetPreferredAllocation"
ALLOCATE_METHOD: Final = f"/{DEVICE_PLUGIN_SERVICE}/Allocate"
PRE_START_CONTAINER_METHOD: Final = f"/{DEVICE_PLUGIN_SERVICE}/PreStartContainer"
DEVICE_PLUGIN_METHODS: Final = (
    GET_DEVICE_PLUGIN_OPTIONS_METHOD,
    LIST_AND_WATCH_METHOD,
    GET_PREFERRED_ALLOCATION_METHOD,
    ALLOCATE_METHOD,
    PRE_START_CONTAINER_METHOD,
)

PODRESOURCES_SERVICE: Final = "v1.PodResourcesLister"
PODRESOURCES_LIST_METHOD: Final = f"/{PODRESOURCES_SERVICE}/List"
PODRESOURCES_GET_ALLOCATABLE_METHOD: Final = f"/{PODRESOURCES_SERVICE}/GetAllocatableResources"

# The kubelet gives PreStartContainer this long before it fails the container start.
PRE_START_CONTAINER_TIMEOUT_S: Final = 30.0

# ---- Dynamic Resource Allocation (k8s.io/kubelet/pkg/apis/dra/v1 and v1beta1, dra-health/v1alpha1,
# pluginregistration/v1) ----
# The kubelet's plugin watcher scans this directory for registration sockets (a name starting with
# "." is skipped); a DRA driver serves its own API on a socket under DEFAULT_KUBELET_PLUGINS_DIR/<driver>/.
DEFAULT_PLUGINS_REGISTRY_DIR: Final = Path("/var/lib/kubelet/plugins_registry")
DEFAULT_KUBELET_PLUGINS_DIR: Final = Path("/var/lib/kubelet/plugins")
DRA_PLUGIN_TYPE: Final = "DRAPlugin"  # PluginInfo.type (pluginregistration/v1 constants.go)
# What a driver lists in PluginInfo.supported_versions: "<proto package's last part>.<service>"
# (dra/v1beta1 types.go DRAPluginService); the kubelet 1.32 picks it before v1alpha4.NodeService.
DRA_V1BETA1_SERVICE_NAME: Final = "v1beta1.DRAPlugin"
PLUGIN_REGISTRATION_SERVICE: Final = "pluginregistration.Registration"
GET_INFO_METHOD: Final = f"/{PLUGIN_REGISTRATION_SERVICE}/GetInfo"
NOTIFY_REGISTRATION_STATUS_METHOD: Final = f"/{PLUGIN_REGISTRATION_SERVICE}/NotifyRegistrationStatus"
DRA_V1BETA1_SERVICE: Final = "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
NODE_PREPARE_RESOURCES_METHOD: Final = f"/{DRA_V1BETA1_SERVICE}/NodePrepareResources"
NODE_UNPREPARE_RESOURCES_METHOD: Final = f"/{DRA_V1BETA1_SERVICE}/NodeUnprepareResources"
# dra/v1 (types.go DRAPluginService): what 1.34+ kubelets prefer. The kubelet takes the first entry
# of the driver's supported_versions that it knows, so a driver lists v1 before v1beta1.
DRA_V1_SERVICE_NAME: Final = "v1.DRAPlugin"
DRA_V1_SERVICE: Final = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
NODE_PREPARE_RESOURCES_V1_METHOD: Final = f"/{DRA_V1_SERVICE}/NodePrepareResources"
NODE_UNPREPARE_RESOURCES_V1_METHOD: Final = f"/{DRA_V1_SERVICE}/NodeUnprepareResources"
# dra-health/v1alpha1: not announced at registration; the kubelet (ResourceHealthStatus) simply
# calls it on the DRA socket and retries every 5 s while it answers an error.
DRA_HEALTH_SERVICE: Final = "v1alpha1.DRAResourceHealth"
NODE_WATCH_RESOURCES_METHOD: Final = f"/{DRA_HEALTH_SERVICE}/NodeWatchResources"
DRA_HEALTH_RETRY_S: Final = 5.0  # dra_plugin_manager.go: wait.UntilWithContext(..., 5*time.Second)
# healthinfo.go DefaultHealthTimeout: a device not reported for this long turns Unknown.
DRA_HEALTH_DEFAULT_TIMEOUT_S: Final = 30.0
# The kubelet's deadline for one DRA call (cm/dra/plugin/registration.go defaultClientCallTimeout).
DRA_CALL_TIMEOUT_S: Final = 45.0
