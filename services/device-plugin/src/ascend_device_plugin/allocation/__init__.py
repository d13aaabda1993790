"""Allocate and GetPreferredAllocation: a kubelet request -> what the container gets, or why not
(refusals, which the gRPC server maps to status codes)."""
