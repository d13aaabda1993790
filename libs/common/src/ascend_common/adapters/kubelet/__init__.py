"""The kubelet's APIs: its gRPC ones (device-plugin v1beta1, PodResources v1, DRA) and its HTTPS
`/pods` (`pods`: the node's pods for `--pod-source kubelet`, over httpx, not the Kubernetes client).

Generated modules (committed; regenerate with `python -m ascend_common.adapters.kubelet.generate`):
`deviceplugin_pb2` / `deviceplugin_pb2_grpc` (package `v1beta1`: Registration, DevicePlugin) and
`podresources_pb2` / `podresources_pb2_grpc` (package `v1`: PodResourcesLister), and for DRA
`pluginregistration_pb2` (Registration), `dra_v1_pb2` and `dra_pb2` (DRAPlugin v1 and v1beta1),
`dra_health_pb2` (package `v1alpha1`: DRAResourceHealth), each with its `_grpc`. Names and paths
are in `constants`. Import the modules you need; this package imports none of them, so that
`import ascend_common` does not pull in protobuf.
"""
