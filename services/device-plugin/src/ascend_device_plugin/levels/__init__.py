"""A 950 chip's rank levels (`levelList`): the per-chip rules (rank_levels), the HCCL topology file's
edges (hccl_topo), the node's lists (level_lists), all pure; and their inputs gathered once per
inventory (level_source)."""
