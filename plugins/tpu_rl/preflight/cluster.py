"""An existing cluster (cluster_mode=existing), read from the Container API through the
provider's GKEHook: there, GKE Standard, and node pools the run's pods can land on.

Why Standard: tpu_rl.cluster.existing.NEEDS_STANDARD. Node pools: the slice's pools
(machine type and `placementPolicy.tpuTopology`, https://cloud.google.com/kubernetes-engine/docs
/reference/rest/v1/projects.locations.clusters.nodePools) and `cpu-np` for the Pathways head and
the training client; a taint the run's pods do not tolerate keeps them Pending.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook, GKEKubernetesHook
from google.api_core.exceptions import NotFound

from tpu_rl.cluster.blueprint import CPU_NODE_POOL
from tpu_rl.cluster.existing import NEEDS_STANDARD
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.fields import RunSettings

STANDARD, POOLS = "gke standard", "node pools"
TPU_TAINT_KEY = "google.com/tpu"  # what the TPU pods tolerate (jobs/manifests.tpu_pod_spec)
BLOCKING = ("NO_SCHEDULE", "NO_EXECUTE")


def read_cluster(s: RunSettings, gcp_conn_id: str) -> Any | None:
    """The Container API's Cluster, regional or zonal, or None when there is none of that
    name. clusters.get names one location (container.v1 discovery document,
    projects.locations.clusters.get: `projects/*/locations/*/clusters/*`; Cluster.location:
    "The name of the Google Compute Engine zone or region in which the cluster resides"): a
    zonal cluster is found under its zone, so the region is read first, then the run's zone."""
    for location in (s.region, s.zone):
        try:
            return GKEHook(gcp_conn_id=gcp_conn_id, location=location).get_cluster(
                name=s.cluster_name, project_id=s.project
            )
        except NotFound:
            continue
    return None


def kube_client(cluster: Any, gcp_conn_id: str) -> Any:
    """A Kubernetes ApiClient on the cluster, as the janitor makes one (GKEKubernetesHook)."""
    return GKEKubernetesHook(
        gcp_conn_id=gcp_conn_id,
        cluster_url=f"https://{cluster.endpoint}",
        ssl_ca_cert=cluster.master_auth.cluster_ca_certificate,
    ).get_conn()


def check_standard(s: RunSettings, cluster: Any | None) -> CheckResult:
    if cluster is None:
        return failed(
            STANDARD,
            f"no GKE cluster {s.cluster_name!r} in {s.project}, {s.region} or {s.zone}",
            "name an existing cluster (gcloud container clusters list "
            f"--project={s.project}) or set cluster_mode=create",
        )
    if cluster.autopilot.enabled:
        return failed(STANDARD, f"{s.cluster_name} is a GKE Autopilot cluster", NEEDS_STANDARD)
    if cluster.location and cluster.location != s.region:
        # the run's GKE steps name the cluster by the run's region (tpu_rl.operators.RUN_CLUSTER:
        # location "{{ params.region }}"), and clusters.get of a zonal cluster under its region
        # answers NOT_FOUND: found here, the run would still not reach it
        return failed(
            STANDARD,
            f"{s.cluster_name} is a zonal cluster (in {cluster.location}); the run's steps reach "
            f"the cluster in region {s.region}",
            "use a regional cluster in the run's region (the tutorial's blueprint makes one), "
            "or cluster_mode=create",
        )
    return passed(STANDARD, f"{s.cluster_name} is a GKE Standard cluster ({cluster.status.name})")


def _taints(pool: Any) -> list[str]:
    return [
        f"{t.key}={t.value}:{t.effect.name}"
        for t in pool.config.taints
        if t.effect.name in BLOCKING and t.key != TPU_TAINT_KEY
    ]


def _run_pools(s: RunSettings, cluster: Any) -> tuple[list[Any], list[Any]]:
    """The cluster's node pools the run lands on: (the slice's, cpu-np)."""
    slices = [
        p
        for p in cluster.node_pools
        if p.config.machine_type == s.compute_type and p.placement_policy.tpu_topology == s.topology
    ]
    return slices, [p for p in cluster.node_pools if p.name == CPU_NODE_POOL]


def pool_accounts(s: RunSettings, cluster: Any) -> dict[str, str]:
    """The service account of each pool the run uses ({pool: email or "default"}), for the
    IAM check."""
    slices, head = _run_pools(s, cluster)
    return {p.name: p.config.service_account for p in [*slices, *head]}


def check_pools(s: RunSettings, cluster: Any) -> CheckResult:
    """The slice pools and cpu-np, without taints the pods do not tolerate."""
    slices, head = _run_pools(s, cluster)
    used = {p.name for p in [*slices, *head]}
    problems = []
    if len(slices) < s.cluster_nodepool_count:
        problems.append(
            f"{len(slices)} node pool(s) of {s.compute_type} {s.topology}, the run needs "
            f"{s.cluster_nodepool_count}"
        )
    if not head:
        problems.append(f"no `{CPU_NODE_POOL}` pool for the Pathways head and the client")
    tainted = {p.name: _taints(p) for p in [*slices, *head] if _taints(p)}
    problems += [
        f"{name} has taints the run's pods do not tolerate: {', '.join(t)}"
        for name, t in tainted.items()
    ]
    pools = ", ".join(sorted(used)) or "none"
    if problems:
        return failed(
            POOLS,
            "; ".join(problems),
            "deploy the tutorial's blueprint (gke-tpu-v6e-advanced: enable_pathways_for_tpus, "
            "the slice pool per CLUSTER_NODEPOOL_COUNT), remove the extra taints (gcloud "
            "container node-pools update <pool> --node-taints=...), or set cluster_mode=create",
        )
    return passed(POOLS, f"{pools}: {s.cluster_nodepool_count} x {s.topology} and cpu-np")
