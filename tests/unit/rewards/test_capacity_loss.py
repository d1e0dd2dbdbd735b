"""Was a failed attempt's capacity taken away (tpu_rl.rewards.capacity_loss): the evidence read
from the client's and backend's pods and the cluster's nodes."""

from __future__ import annotations

from typing import Any

import pytest

from tpu_rl.kube import objects as kube
from tpu_rl.kube.async_client import KubeApiError
from tpu_rl.rewards.capacity_loss import evidence, nodes_if_allowed


class Cluster:
    """AsyncKube's get_json and list_items on a node list (or an error) and backend pods."""

    def __init__(self, nodes: list[dict] | KubeApiError, backend_pods: list[dict]) -> None:
        self.nodes, self.backend_pods, self.asked = nodes, backend_pods, []

    async def get_json(self, path: str, query: Any = None) -> dict:
        self.asked.append(path)
        if isinstance(self.nodes, KubeApiError):
            raise self.nodes
        return {"items": self.nodes}

    async def list_items(self, path: str, selector: str) -> list[dict]:
        self.asked.append(f"{path}?{selector}")
        return self.backend_pods


def running(name: str, node: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"nodeName": node}, "status": {"phase": "Running"}}


async def test_the_nodes_are_none_without_the_right_to_list_them():
    assert await nodes_if_allowed(Cluster([{"metadata": {"name": "n"}}], [])) == [
        {"metadata": {"name": "n"}}
    ]
    assert await nodes_if_allowed(Cluster(KubeApiError(403, "forbidden"), [])) is None


async def test_a_transient_error_listing_the_nodes_is_raised():
    with pytest.raises(KubeApiError):
        await nodes_if_allowed(Cluster(KubeApiError(503, "unavailable"), []))


async def test_a_backend_pod_on_a_node_that_is_gone_is_evidence():
    client = running("client", "cpu-0")
    cluster = Cluster([{"metadata": {"name": "cpu-0"}}], [running("worker-0", "tpu-0")])
    found = await evidence(cluster, "ns", [client], "rl-1-backend")
    assert found is not None and "tpu-0" in found
    selector = f"{kube.JOBSET_NAME_LABEL}=rl-1-backend"
    assert f"{kube.pods_path('ns')}?{selector}" in cluster.asked


async def test_pods_on_nodes_still_there_are_no_evidence_and_no_backend_is_not_listed():
    cluster = Cluster([{"metadata": {"name": "cpu-0"}}], [])
    assert await evidence(cluster, "ns", [running("client", "cpu-0")], None) is None
    assert cluster.asked == [kube.NODES_PATH]
