"""The plugin's edge to the cluster, one concept a module: the API connection (`connection`), the
node's pod index (`pods`) and the feed that keeps it (`feed`), pod patches (`patching`), the node's
own Node (`node`), its labels (`labels`), an earlier generation's resources taken off it (`retire`),
the slow-node ConfigMap (`slow_node`); `edge` starts and stops them in order. Imported only with
`--kube api`: the Kubernetes client is most of an offline plugin's memory. Nothing here reads the
API server on a timer."""
