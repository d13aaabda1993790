"""The Kubernetes Events the fault-manager sends about its node: which ones, how often (per-chip
rate limits with summaries), and the sender that hands them to a sink of
`ascend_common.adapters.kube.events` without ever holding up the reactor."""
