"""The reward wait's shells: the trigger, the poking sensor and their poll read the pod's log,
the event files and the cluster, hand what they read to the watch (tpu_rl.watch) and do what it
says."""
