"""Kubernetes access: objects, what the cleanup deletes (swept: the table of swept kinds, and
swept_doc: its table in docs/operations.md), a client for a GKE cluster, async reads and watches
for triggers, Kueue's Workloads, verdicts on pods."""
