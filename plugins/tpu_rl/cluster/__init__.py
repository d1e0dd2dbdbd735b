"""The GKE cluster with its TPU slice: Cluster Toolkit's blueprint and Kueue configuration,
capacity modes, the capacity ladder, gcluster."""
