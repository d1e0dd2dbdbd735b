"""Kubernetes access: objects, async reads and watches for triggers, Kueue, verdicts on pods."""
