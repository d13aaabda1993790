"""Kubernetes access for the node services, one module per verb; everything that touches the
official `kubernetes` client lives here. The one thing done at import: the `kubernetes` package and
two of its sub-packages are registered without their __init__, which load every sub-package
(adapters.lazy_packages): the modules here use kubernetes.client, the in-cluster loader of
kubernetes.config (its kubeconfig loader only for a kubeconfig) and, through the client,
kubernetes.utils.retry.

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
bare_package("kubernetes.config")  # its __init__ loads kube_config: requests, oauthlib, PyYAML
bare_package("kubernetes.utils")  # its __init__ loads create_from_yaml (PyYAML), metrics, durationpy
