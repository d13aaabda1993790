"""ascendctl: an operator CLI over the dcmi-exporter's and fault-manager's local APIs."""
