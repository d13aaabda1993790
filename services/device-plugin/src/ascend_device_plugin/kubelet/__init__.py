"""The kubelet's side: one DevicePlugin gRPC server per resource (server), its registration with every
kubelet instance (registrar, dirwatch), and the PodResources lookup of the plain path (podresources)."""
