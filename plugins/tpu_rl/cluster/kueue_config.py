"""The blueprint's Kueue configuration, edited so its ClusterQueue admits the Pathways backend:
the TPU flavor for the workers and a cpu-np flavor for the head, in one resource group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from tpu_rl.cluster.blueprint import CPU_NODE_POOL, BlueprintError, dump_yaml
from tpu_rl.kube.kueue_rules import GROUP, VERSION
from tpu_rl.tpu import generation_for

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

CONFIG_FILE = "kueue-configuration.yaml.tftpl"  # the blueprint stages it from beside itself
TPU = "google.com/tpu"
TPU_FLAVOR, PATHWAYS_FLAVOR = "tpu-flavor", "pathways-flavor"
# Cluster Toolkit's kubectl-apply defaults for its Pathways Kueue configuration.
PATHWAYS_CPU_QUOTA, PATHWAYS_MEMORY_QUOTA = 480, "2000G"
TPU_FLAVOR_CPU_QUOTA, TPU_FLAVOR_MEMORY_QUOTA = "999999", "999999T"


def _flavor(name: str, quotas: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": k, "nominalQuota": v} for k, v in quotas.items()]}


def pathways_resource_group_flavor() -> dict[str, Any]:
    """The cpu-np flavor of the Pathways group: the head's cpu and memory, no TPU."""
    return _flavor(
        PATHWAYS_FLAVOR, {TPU: 0, "cpu": PATHWAYS_CPU_QUOTA, "memory": PATHWAYS_MEMORY_QUOTA}
    )


def pathways_resource_group(settings: RunSettings) -> dict[str, Any]:
    """One group covering TPU, cpu and memory, as Cluster Toolkit's Pathways configuration:
    the TPU flavor for the workers, the cpu-np flavor for the head (one group, so Kueue picks
    the flavor whose node labels match each pod set's node selector)."""
    chips = settings.slices.chips
    quota = {TPU: chips, "cpu": TPU_FLAVOR_CPU_QUOTA, "memory": TPU_FLAVOR_MEMORY_QUOTA}
    return {
        "coveredResources": [TPU, "cpu", "memory"],
        "flavors": [_flavor(TPU_FLAVOR, quota), pathways_resource_group_flavor()],
    }


def resource_flavors(settings: RunSettings) -> list[dict[str, Any]]:
    """The two ResourceFlavors the Pathways group names: the TPU flavor, on the nodes of the
    run's TPU generation, and the cpu-np one."""
    label = generation_for(settings.tpu_type).accelerator_label
    return [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceFlavor",
            "metadata": {"name": TPU_FLAVOR},
            "spec": {
                "nodeLabels": {"cloud.google.com/gke-tpu-accelerator": label},
                "tolerations": [
                    {"effect": "NoSchedule", "key": TPU, "value": "present"},
                ],
            },
        },
        pathways_flavor(),
    ]


def pathways_flavor() -> dict[str, Any]:
    """The ResourceFlavor of the cluster's cpu-np nodes, where the Pathways head runs."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceFlavor",
        "metadata": {"name": PATHWAYS_FLAVOR},
        "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": CPU_NODE_POOL}},
    }


def _cover_cpu_and_memory(group: dict[str, Any]) -> None:
    """TPU flavors get unlimited cpu/memory, and a cpu-np flavor (no TPU) joins the group."""
    covered = group.setdefault("coveredResources", [])
    covered += [r for r in ("cpu", "memory") if r not in covered]
    flavors = group.setdefault("flavors", [])
    for flavor in flavors:
        resources = flavor.setdefault("resources", [])
        have = {r.get("name") for r in resources}
        high = {"cpu": TPU_FLAVOR_CPU_QUOTA, "memory": TPU_FLAVOR_MEMORY_QUOTA}
        resources += [{"name": k, "nominalQuota": v} for k, v in high.items() if k not in have]
    if all(f.get("name") != PATHWAYS_FLAVOR for f in flavors):
        flavors.append(pathways_resource_group_flavor())


def edit_kueue_config(config_yaml: str) -> str:
    """The blueprint's Kueue template, its ClusterQueue covering cpu and memory as well.

    The v6e example covers only google.com/tpu, so the Pathways backend, whose head requests
    cpu and memory on cpu-np, would never be admitted; Cluster Toolkit's own Pathways
    configuration (kubectl-apply's kueue-configuration-pathways.yaml.tftpl) covers all three
    in one group with a TPU flavor and a cpu-np flavor. Template variables stay as they are.
    """
    docs = [d for d in yaml.safe_load_all(config_yaml) if d]
    queues = [d for d in docs if d.get("kind") == "ClusterQueue"]
    groups = [
        g
        for q in queues
        for g in (q.get("spec") or {}).get("resourceGroups") or []
        if TPU in (g.get("coveredResources") or [])
    ]
    if not groups:
        raise BlueprintError(f"{CONFIG_FILE}: no ClusterQueue group covers google.com/tpu")
    for group in groups:
        _cover_cpu_and_memory(group)
    flavors = {d["metadata"]["name"] for d in docs if d.get("kind") == "ResourceFlavor"}
    if PATHWAYS_FLAVOR not in flavors:
        docs.insert(0, {**pathways_flavor(), "apiVersion": queues[0]["apiVersion"]})
    return "---\n".join(dump_yaml(d) for d in docs)
