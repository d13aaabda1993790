"""Soft share (--share-dev-count 100 with the soft-share config dir): the switch and the ids per chip
(switch), the Allocate path that places a pod on the chip Volcano chose with its AI-core and memory
quotas (softshare_path, pod), and the per-pod directories and quota files it writes on the host and
removes (dirs, files, cleanup)."""
