"""Kubernetes access for the node services, one module per verb; everything that touches the
official `kubernetes` client lives here, and it is its asyncio client (`kubernetes.aio`, on
aiohttp): no Kubernetes call runs in a thread.

- config: where the apiserver is (kubeconfig, in-cluster) and the ApiClient for it
- client: the one place requests are built (CoreV1, raw JSON), typed errors, bounded retries
- watch: one watch request (the client's Watch) as raw JSON events; `Reflector`, the one list+watch
  loop (as client-go's reflector: 5-10 min watches, bookmarks, resume, 410, backoff, Retry-After);
  `WatchedObject`, one object by name through it; `first_change` of one object
- pod_watch: the node's pods as SlimPods (ascend_common.pods), from one Reflector
- configmaps: read, write (optimistic concurrency) and watch ConfigMaps (`ConfigMapWatch`), or their offline files
- events: core/v1 Events, rate-limited per chip, to the apiserver or a file
- patch: strategic-merge patches of pods and nodes, and node reads
"""
