"""The device-info ConfigMap `kube-system/mindx-dl-deviceinfo-<node>`'s bytes, pure: the ConfigMap
(configmap), each chip's `-Fault` list and UpgradeFaultReason (faultlist). What it says of the
reactor's published state, and its writer, are a layer above the reactor (fault_manager.publishing)."""
