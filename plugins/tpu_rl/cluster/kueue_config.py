"""The blueprint's Kueue configuration, edited so its ClusterQueue admits the Pathways backend."""

from __future__ import annotations

import yaml

from tpu_rl.cluster.blueprint import BlueprintError, dump_yaml
from tpu_rl.kube import kueue

CONFIG_FILE = "kueue-configuration.yaml.tftpl"  # the blueprint stages it from beside itself


def _cover_cpu_and_memory(group: dict) -> None:
    """TPU flavors get unlimited cpu/memory, and a cpu-np flavor (no TPU) joins the group."""
    covered = group.setdefault("coveredResources", [])
    covered += [r for r in ("cpu", "memory") if r not in covered]
    flavors = group.setdefault("flavors", [])
    for flavor in flavors:
        resources = flavor.setdefault("resources", [])
        have = {r.get("name") for r in resources}
        high = {"cpu": kueue.TPU_FLAVOR_CPU_QUOTA, "memory": kueue.TPU_FLAVOR_MEMORY_QUOTA}
        resources += [{"name": k, "nominalQuota": v} for k, v in high.items() if k not in have]
    if all(f.get("name") != kueue.PATHWAYS_FLAVOR for f in flavors):
        flavors.append(kueue.pathways_resource_group_flavor())


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
        if kueue.TPU in (g.get("coveredResources") or [])
    ]
    if not groups:
        raise BlueprintError(f"{CONFIG_FILE}: no ClusterQueue group covers google.com/tpu")
    for group in groups:
        _cover_cpu_and_memory(group)
    flavors = {d["metadata"]["name"] for d in docs if d.get("kind") == "ResourceFlavor"}
    if kueue.PATHWAYS_FLAVOR not in flavors:
        pathways = next(
            f for f in kueue.resource_flavors() if f["metadata"]["name"] == kueue.PATHWAYS_FLAVOR
        )
        docs.insert(0, {**pathways, "apiVersion": queues[0]["apiVersion"]})
    return "---\n".join(dump_yaml(d) for d in docs)
