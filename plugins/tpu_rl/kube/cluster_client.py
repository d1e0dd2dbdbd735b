"""A Kubernetes client for a GKE cluster already looked up, with a connection's credentials."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from google.cloud.container_v1.types import Cluster
    from kubernetes.client import ApiClient


def cluster_api_client(cluster: Cluster, gcp_conn_id: str) -> ApiClient:
    """The cluster's API server on its public endpoint with its CA, as the provider's GKE
    operators connect by default (airflow/providers/google/cloud/operators/kubernetes_engine.py,
    GKEClusterAuthDetails.fetch_cluster_info), the token from the Google connection."""
    from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesHook

    hook = GKEKubernetesHook(
        gcp_conn_id=gcp_conn_id,
        cluster_url=f"https://{cluster.endpoint}",
        ssl_ca_cert=cluster.master_auth.cluster_ca_certificate,
    )
    return hook.get_conn()
