"""The device-info ConfigMap `kube-system/mindx-dl-deviceinfo-<node>`: its bytes (configmap), each chip's
`-Fault` list and UpgradeFaultReason (faultlist), what it says of the published state (reports), and its
writer."""
