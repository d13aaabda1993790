"""npu-exporter's container families on the plugin's /metrics: the families computed from the
kubelet's PodResources answer and the exporter's chips (families, pure), sampled by a task of
their own (sampler)."""
