"""device-plugin: serves the node's chips to the kubelet (the device-plugin API and DRA), allocates them
and writes what Volcano, ClusterD and the job agents read (pod annotations, node labels)."""
