"""fault-manager: fault policy with durable history, verdicts and the device-info ConfigMap."""
