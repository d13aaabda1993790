"""npu-exporter's metric families (`families`), from the snapshot, the last samples and which container
holds which chip (`holders`)."""
