"""What a cluster made from the tutorial's blueprint runs besides its node pools, as preflight
reads it: the JobSet and Kueue controllers (their Deployments, image tag = version) and the
PriorityClasses, and its node pools as the Container API describes them.

Controllers: the releases' manifests install `jobset-controller-manager` in `jobset-system`
(image registry.k8s.io/jobset/jobset:<v>) and `kueue-controller-manager` in `kueue-system`
(registry.k8s.io/kueue/kueue:<v>). Versions: JobSet v0.10.1 (tests/fixtures/vendor/SOURCE.md),
Kueue v0.17.1 (Cluster Toolkit's kubectl-apply default, mid-2026). PriorityClasses: gcluster's
pkg/orchestrator/gke/templates/priority_classes.tmpl (very-low 100 ... very-high 1000, medium
the global default). An existing cluster's vars `jobset_version` / `kueue_version` change a
version; None leaves that controller out.
"""

from __future__ import annotations

from typing import Any

from sandbox.kube_state import ApiError, ClusterState

VERSIONS = {"jobset": "v0.10.1", "kueue": "v0.17.1"}
CONTROLLERS = {
    "jobset": ("jobset-system", "jobset-controller-manager", "registry.k8s.io/jobset/jobset"),
    "kueue": ("kueue-system", "kueue-controller-manager", "registry.k8s.io/kueue/kueue"),
}
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"  # cluster_model.TOPOLOGY_LABEL
PRIORITY_CLASSES = {"very-low": 100, "low": 250, "medium": 500, "high": 750, "very-high": 1000}


def addon_versions(variables: dict[str, Any]) -> dict[str, str | None]:
    """The controllers' versions an existing cluster's vars ask for (popped from them)."""
    return {name: variables.pop(f"{name}_version", v) for name, v in VERSIONS.items()}


def _deployment(namespace: str, name: str, image: str) -> dict[str, Any]:
    labels = {"control-plane": "controller-manager"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": image}]},
            },
        },
    }


def _create(emu: ClusterState, obj: dict[str, Any]) -> None:
    try:
        emu.create(obj)
    except ApiError as err:
        if err.code != 409:
            raise


def install_addons(emu: ClusterState, versions: dict[str, str | None]) -> None:
    """The controllers' namespaces and Deployments, and the PriorityClasses (idempotent)."""
    for name, version in versions.items():
        if version is None:
            continue
        namespace, deployment, image = CONTROLLERS[name]
        _create(emu, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        _create(emu, _deployment(namespace, deployment, f"{image}:{version}"))
    for name, value in PRIORITY_CLASSES.items():
        _create(
            emu,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "globalDefault": name == "medium",
            },
        )


def node_pools(model: Any) -> list[dict[str, Any]]:
    """The cluster's node pools as the Container API's Cluster.node_pools holds them."""
    effects = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
    return [
        {
            "name": pool.name,
            "config": {
                "machine_type": pool.machine_type,
                "service_account": pool.service_account,
                "taints": [
                    {"key": t["key"], "value": t["value"], "effect": effects[t["effect"]]}
                    for t in pool.taints
                ],
            },
            "placement_policy": {"tpu_topology": pool.labels.get(TOPOLOGY_LABEL, "")},
        }
        for pool in model.pools
    ]
