"""Dynamic vNPU (`npu-core`): the npu-core resource's ids and health (cores), the vNPU a pod is
annotated for, created at Allocate and destroyed once no pod holds it (dynamic)."""
