"""What an existing cluster (cluster_mode=existing) must be before a run spends anything: there,
and GKE Standard. Read from the Container API through the provider's GKE hook."""

from __future__ import annotations

from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
from google.api_core.exceptions import NotFound

from tpu_rl.settings.fields import RunSettings

# Why a run needs GKE Standard: the Pathways head pod uses the host network (gcluster's
# pathways_jobset.tmpl; tpu_rl.backend.jobset), which Autopilot refuses ("Host namespaces ...
# hostNetwork" under https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-security
# #built-in-security), and it runs on the blueprint's `cpu-np` node pool, while Autopilot
# manages the nodes itself (no node pools of one's own:
# https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-overview).
NEEDS_STANDARD = (
    "the run needs GKE Standard: its Pathways pods use the host network, which Autopilot "
    "refuses, and its Pathways head runs on the `cpu-np` node pool, which an Autopilot cluster "
    "cannot have; name a Standard cluster (the tutorial's blueprint makes one) or set "
    "cluster_mode=create"
)


def existing_cluster_problem(settings: RunSettings, gcp_conn_id: str) -> str | None:
    """Why the run cannot use the existing cluster it names, if it cannot: it does not exist
    in the run's project and region, or it is an Autopilot cluster (`autopilot.enabled` on the
    Container API's Cluster resource)."""
    s = settings
    hook = GKEHook(gcp_conn_id=gcp_conn_id, location=s.region)
    try:
        cluster = hook.get_cluster(name=s.cluster_name, project_id=s.project)
    except NotFound:
        return (
            f"cluster_name: no GKE cluster {s.cluster_name!r} in project {s.project}, location "
            f"{s.region} (cluster_mode=existing uses a cluster that exists; cluster_mode=create "
            "makes one)"
        )
    if cluster.autopilot.enabled:
        return f"cluster_name: {s.cluster_name!r} is a GKE Autopilot cluster; {NEEDS_STANDARD}"
    return None
