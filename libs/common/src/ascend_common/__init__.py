"""Shared vocabulary of the Ascend node stack, in two layers.

The domain, at the top of the package: chips, naming, fault policy (faults/), the API schemas
(schemas/), the pod model (pods), the "in use" predicates (inuse), vNPUs, reset groups and Go's
JSON encoding (gojson). Pure code: it performs no
I/O and imports no I/O library (no Kubernetes client, gRPC, HTTP, server, database, socket,
thread or event loop), so every rule in it is testable as a plain function.

The adapters, in `ascend_common.adapters`: Kubernetes access by verb (adapters.kube), the
kubelet's gRPC stubs (adapters.kubelet), HTTP serving, process settings and logs, and the
published-stream log. They use the domain, never the other way round; tests/test_boundaries.py
checks both directions through every chain of imports. Each adapter's third-party libraries come
with an extra of the ascend-common distribution ([kube], [grpc], [http], [serve]), so a service
installs only what it reaches.

Services import this package; it imports no service.
"""
