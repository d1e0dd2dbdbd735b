"""Whose a cluster of `cluster_mode=create` is: the deployment label the blueprint gives it
(blueprint.CLUSTER_DEPLOYMENT_LABEL), read from the Container API through the provider's GKE hook.

Two deployments that name the same cluster share its Terraform state (its prefix comes from the
cluster's name, blueprint.default_state_prefix), so the second one's `gcluster deploy` would
adopt the first one's cluster and its `cleanup_cluster` would destroy it under a running
training. A cluster labelled with another deployment, or with none, is left alone.
"""

from __future__ import annotations

from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
from google.api_core.exceptions import NotFound

from tpu_rl.cluster.blueprint import CLUSTER_DEPLOYMENT_LABEL
from tpu_rl.settings.fields import RunSettings


def foreign_cluster(settings: RunSettings, gcp_conn_id: str, identity: str) -> str | None:
    """Why the run must leave the cluster it names alone: it exists and its
    `resource_labels` (Container API Cluster.resourceLabels) do not name deployment `identity`.
    None when there is no such cluster, or it is this deployment's."""
    s = settings
    hook = GKEHook(gcp_conn_id=gcp_conn_id, location=s.region)
    try:
        cluster = hook.get_cluster(name=s.cluster_name, project_id=s.project)
    except NotFound:
        return None
    owner = dict(cluster.resource_labels).get(CLUSTER_DEPLOYMENT_LABEL)
    if owner == identity:
        return None
    whose = f"deployment {owner!r}" if owner else "no deployment of this product"
    return (
        f"cluster {s.cluster_name!r} in {s.project}/{s.region} exists and belongs to {whose} "
        f"(its label {CLUSTER_DEPLOYMENT_LABEL}), not to this run's ({identity!r}): deploying "
        "would share its Terraform state and this run's cleanup would destroy it; choose "
        "another cluster_name, or cluster_mode=existing to run on it"
    )
