"""Kueue's Workloads, read without I/O: which one belongs to an object, and whether Kueue can
ever admit it as the queues are configured."""

from __future__ import annotations

from typing import Any

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"  # the API of the Kueue (0.15+) the blueprint installs
# Workload messages that no amount of waiting changes (Kueue's flavor assigner): a resource the
# ClusterQueue does not cover, and a request over the queue's whole quota.
NEVER_ADMITTED = ("unavailable in ClusterQueue", "request > maximum capacity")


def workloads_path(namespace: str) -> str:
    """The API path of the namespace's Workloads."""
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/workloads"


def workload_for(workloads: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    """The Workload Kueue made for that object (its owner), if there is one yet."""
    for workload in workloads:
        owners = (workload.get("metadata") or {}).get("ownerReferences") or []
        if any(o.get("kind") == kind and o.get("name") == name for o in owners):
            return workload
    return None


def never_admitted(workload: dict[str, Any]) -> str | None:
    """Kueue's message when the Workload cannot be admitted as things are configured.

    Waiting for quota that others hold is not this: its message says how much more is needed.
    """
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "False" or cond.get("type") not in ("QuotaReserved", "Admitted"):
            continue
        message = cond.get("message") or ""
        if cond.get("reason") == "Inadmissible" or any(m in message for m in NEVER_ADMITTED):
            return message or cond.get("reason")
    return None
