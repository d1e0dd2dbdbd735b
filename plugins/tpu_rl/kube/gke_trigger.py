"""What every trigger of this package needs to reach the run's cluster from the triggerer."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesAsyncHook
from airflow.triggers.base import BaseTrigger

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


class GkeTrigger(BaseTrigger):
    """A trigger whose `kwargs` (its serialized form) hold the cluster connection."""

    kwargs: dict[str, Any]

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", dict(self.kwargs)

    @cached_property
    def hook(self) -> GKEKubernetesAsyncHook:
        """The provider's async GKE hook on the trigger's cluster and credentials."""
        return GKEKubernetesAsyncHook(**{key: self.kwargs[key] for key in CONNECTION_KEYS})
