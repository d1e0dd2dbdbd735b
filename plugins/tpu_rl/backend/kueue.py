"""Kueue checks for the Pathways backend: queue coverage before submitting, admission after.

Cluster Toolkit's `gcluster job submit --pathways` (pkg/orchestrator/gke,
ensureClusterQueueCoverage) reads the LocalQueue's ClusterQueue, fills it when it has no
resource groups and only warns when it does not cover cpu and memory. A backend whose head
requests cpu and memory in a queue that covers only google.com/tpu is never admitted, so this
module fails before submitting instead; the capacity wait (PodsReadyTrigger) reads the
Workload so that Kueue's own reason ends the wait at once (tpu_rl.kube.kueue_rules).
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.rest import ApiException

from tpu_rl.cluster.kueue_config import pathways_resource_group, resource_flavors
from tpu_rl.jobs.manifests import Manifest
from tpu_rl.kube.kueue_rules import GROUP, VERSION
from tpu_rl.layout import RunLayout


class KueueError(RuntimeError):
    """The queue cannot admit the backend, as configured."""


def _api(plural: str) -> dict[str, str]:
    return {"group": GROUP, "version": VERSION, "plural": plural}


def requested_resources(obj: Manifest) -> set[str]:
    """Every resource a container of the JobSet requests (a limit implies the request)."""
    found: set[str] = set()
    for rj in obj["spec"]["replicatedJobs"]:
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            resources = c.get("resources") or {}
            found |= set(resources.get("requests") or {}) | set(resources.get("limits") or {})
    return found


def covered_resources(cluster_queue: dict[str, Any]) -> set[str]:
    groups = (cluster_queue.get("spec") or {}).get("resourceGroups") or []
    return {r for g in groups for r in g.get("coveredResources") or []}


def ensure_coverage(custom: Any, layout: RunLayout, jobset: Manifest, log: Any) -> None:
    """Check that the run's LocalQueue leads to a ClusterQueue covering what the JobSet asks
    for; fill an empty ClusterQueue as gcluster does; else raise KueueError naming both."""
    namespace, queue = layout.settings.namespace, layout.settings.kueue_queue
    try:
        local = custom.get_namespaced_custom_object(
            namespace=namespace, name=queue, **_api("localqueues")
        )
    except ApiException as err:
        if err.status == 404:
            raise KueueError(
                f"Kueue LocalQueue {namespace}/{queue} does not exist (or Kueue is not "
                "installed): create it, or set kueue_queue to an existing queue ('' for none)"
            ) from err
        raise
    name = (local.get("spec") or {}).get("clusterQueue") or queue
    try:
        cluster_queue = custom.get_cluster_custom_object(name=name, **_api("clusterqueues"))
    except ApiException as err:
        if err.status == 404:
            raise KueueError(
                f"Kueue ClusterQueue {name!r} of LocalQueue {namespace}/{queue} does not exist"
            ) from err
        raise
    needed = requested_resources(jobset)
    covered = covered_resources(cluster_queue)
    if not covered:
        log.info("Kueue ClusterQueue %s is empty; filling it as gcluster does.", name)
        _fill(custom, cluster_queue, layout)
        return
    if missing := sorted(needed - covered):
        raise KueueError(
            f"Kueue ClusterQueue {name!r} (LocalQueue {namespace}/{queue}) does not cover "
            f"{', '.join(missing)}, which the Pathways backend requests (it covers "
            f"{', '.join(sorted(covered))}); Kueue would never admit the backend. Add them to "
            "its resourceGroups (as Cluster Toolkit's Pathways Kueue configuration does: "
            "google.com/tpu, cpu and memory), or set kueue_queue to a queue that covers them."
        )
    log.info("Kueue ClusterQueue %s covers %s.", name, ", ".join(sorted(needed)))


def _fill(custom: Any, cluster_queue: dict[str, Any], layout: RunLayout) -> None:
    for flavor in resource_flavors(layout.settings):
        try:
            custom.create_cluster_custom_object(body=flavor, **_api("resourceflavors"))
        except ApiException as err:
            if err.status != 409:  # already there: keep the cluster's own
                raise
    cluster_queue.setdefault("spec", {})["resourceGroups"] = [
        pathways_resource_group(layout.settings)
    ]
    custom.replace_cluster_custom_object(
        name=cluster_queue["metadata"]["name"], body=cluster_queue, **_api("clusterqueues")
    )
