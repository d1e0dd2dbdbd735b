"""The run's batch Jobs: MaxText command lines, manifests, and the triggerer's wait for a Job."""
