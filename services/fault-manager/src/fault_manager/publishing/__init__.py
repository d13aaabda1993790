"""What the reactor publishes, told to the cluster: the device-info ConfigMap rendered from the
published NodeState (reports) and written on change and on its refresh period (writer)."""
