"""Allocate: a kubelet request -> what the container gets, or why not (refusals, which the gRPC
server maps to status codes). What every path shares: the container's response (response,
containers), the annotations an allocated pod gets and their report (annotations, report, plain),
their repair (repair_rules, repair) and which kubelet API holds each chip (chip_owners)."""
