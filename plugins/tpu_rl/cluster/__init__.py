"""The GKE cluster with its TPU slice: Cluster Toolkit's blueprint, capacity modes, gcluster."""
