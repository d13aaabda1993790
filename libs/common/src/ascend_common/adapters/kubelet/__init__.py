"""The kubelet's gRPC APIs: device-plugin v1beta1 and PodResources v1.

Generated modules (committed; regenerate with `python -m ascend_common.adapters.kubelet.generate`):
`deviceplugin_pb2` / `deviceplugin_pb2_grpc` (package `v1beta1`: Registration, DevicePlugin) and
`podresources_pb2` / `podresources_pb2_grpc` (package `v1`: PodResourcesLister). Names and paths
are in `constants`. Import the modules you need; this package imports none of them, so that
`import ascend_common` does not pull in protobuf.
"""
