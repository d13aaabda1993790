"""Hot reset (contract section 8): which chip groups may reset and when, the reset tokens, the job's
reset ConfigMap (reset_config), the node's ResetInfo annotation (reset_info) and where it is kept."""
