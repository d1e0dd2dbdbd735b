"""What every trigger of this package needs to reach the run's cluster from the triggerer."""

from __future__ import annotations

from typing import Any

from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesAsyncHook

CONNECTION_KEYS = (
    "cluster_url",
    "ssl_ca_cert",
    "gcp_conn_id",
    "impersonation_chain",
    "use_dns_endpoint",
)


def connection_of(operator: Any) -> dict[str, Any]:
    """The cluster and credentials of a GKE operator (GKEOperatorMixin), as trigger kwargs."""
    cluster_url, ssl_ca_cert = operator.cluster_info
    return {
        "cluster_url": cluster_url,
        "ssl_ca_cert": ssl_ca_cert,
        "gcp_conn_id": operator.gcp_conn_id,
        "impersonation_chain": operator.impersonation_chain,
        "use_dns_endpoint": operator.use_dns_endpoint,
    }


def async_hook(kwargs: dict[str, Any]) -> GKEKubernetesAsyncHook:
    """The provider's async GKE hook for a trigger's serialized kwargs."""
    return GKEKubernetesAsyncHook(**{key: kwargs[key] for key in CONNECTION_KEYS})
