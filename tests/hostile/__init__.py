"""Hostile input (issue 32): each test is one attack as a user who controls a pod spec, a claim,
a ConfigMap, a file under a shared host directory or a tool on the host would make it, and asserts
the safe outcome: nothing written or deleted outside its root, no exit, no traceback, the service
still answering."""
