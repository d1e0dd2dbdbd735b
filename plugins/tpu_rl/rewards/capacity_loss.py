"""Was a failed training attempt's capacity taken away? The evidence, read from the cluster.

A Spot or flex-start preemption, a node removed or shut down, an eviction: the resume after
capacity loss (tpu_rl.checkpoints.resume) acts only on this evidence, never on a bare client
failure.
"""

from __future__ import annotations

from typing import Any

from tpu_rl.kube import objects as kube
from tpu_rl.kube import verdicts
from tpu_rl.kube.async_client import AsyncKube, KubeApiError

# Failures that may be lost capacity (the client or backend died): judged on the evidence.


async def evidence(
    api: AsyncKube,
    namespace: str,
    client_pods: list[dict[str, Any]],
    backend_jobset: str | None,
) -> str | None:
    """The first sign on the client's or backend's pods or their nodes (gone, or under the
    termination notice) that capacity went away; None when there is none."""
    pods = list(client_pods)
    if backend_jobset:
        selector = f"{kube.JOBSET_NAME_LABEL}={backend_jobset}"
        pods += await api.list_items(kube.pods_path(namespace), selector)
    return verdicts.capacity_evidence(pods, await nodes_if_allowed(api))


async def nodes_if_allowed(api: AsyncKube) -> list[dict[str, Any]] | None:
    """The cluster's nodes; None without the right to list them (403)."""
    try:
        return (await api.get_json(kube.NODES_PATH)).get("items") or []
    except KubeApiError as error:
        if error.transient:
            raise
        return None
