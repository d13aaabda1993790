"""The exporter's periodic tasks, on one scaffold (`periodic`): hung jobs, the 950's UB codes, the 910's
lost RoCE link-down, the A3 switch faults, the slow metric sources, host NIC addresses; and the A3
single-die policy, once at start."""
