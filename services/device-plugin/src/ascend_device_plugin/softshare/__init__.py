"""Soft share (--share-dev-count 100 with the soft-share config dir): the Allocate path that places a
pod on the chip Volcano chose with its AI-core and memory quotas (path), and the per-pod directories
and quota files it writes on the host (dirs, files)."""
