"""Kubernetes access for the node services, one module per verb; everything that touches the
official `kubernetes` client lives here. The one thing done at import: the `kubernetes` package is
registered without its __init__, which would load every sub-package (adapters.lazy_packages);
the modules here use kubernetes.client and kubernetes.config alone.

- config: where the apiserver is (kubeconfig, in-cluster) and the ApiClient for it
- client: calls in threads with timeouts, typed errors, bounded retries (what every verb uses)
- watch: one watch request as raw JSON events; `first_change` of one object
- pod_watch: the node's pods as SlimPods (ascend_common.pods), from one list+watch
- configmaps: read, write (optimistic concurrency) and watch ConfigMaps, or their offline files
- events: core/v1 Events, rate-limited per chip, to the apiserver or a file
- patch: strategic-merge patches of pods and nodes, and node reads
"""

from ascend_common.adapters.lazy_packages import bare_package

bare_package("kubernetes")
