"""What the resource manager publishes and every path reads: the inventory snapshot and the
interfaces it is read through (snapshot), and each resource's versioned advertised devices (views)."""
