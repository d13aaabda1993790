"""Dynamic vNPU (`npu-core`): the vNPU a pod is annotated for, created at Allocate and destroyed once
no pod holds it (dynamic)."""
