"""The I/O side of ascend_common: everything that talks to a process, a socket or a cluster.

- kube: the Kubernetes API by verb (config, client, watch, pod_watch, configmaps, events, patch); extra [kube]
- kubelet: the kubelet's gRPC APIs (device plugin v1beta1, PodResources v1); extra [grpc]
- serving: uvicorn on a Unix socket or a TCP port; extra [serve]
- seqlog: the sequence-numbered log a service's event stream is served from
- settings, logs: a service's flags and environment, and its JSON log lines

Adapters import the domain (the top of ascend_common), never the other way round.
"""
