"""Kueue's Workloads as the tests of the backend's queue and of Kueue's rules write them."""

from __future__ import annotations

# Kueue's message for a pod set asking for a resource its ClusterQueue does not cover.
UNCOVERED = (
    "couldn't assign flavors to pod set pathways-head: resource cpu unavailable in ClusterQueue"
)


def workload(owner: str, reason: str, message: str) -> dict:
    """The Workload Kueue made for JobSet `owner`, not admitted for `reason`/`message`."""
    return {
        "metadata": {
            "name": f"jobset-{owner}-1a2b3",
            "ownerReferences": [{"kind": "JobSet", "name": owner}],
        },
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "reason": reason, "message": message}
            ]
        },
    }
