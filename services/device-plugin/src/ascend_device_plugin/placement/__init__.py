"""GetPreferredAllocation: the affinity groups a request should stay inside (topology) and the
pick among the available ids (preferred). Pure."""
