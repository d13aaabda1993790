"""What each resource advertises: the resource manager combines chips, verdicts and pods (manager,
health) into the inventory and the versioned views the kubelet's streams read; the ids each resource
offers (devices, mixed: 310P mixed insert)."""
