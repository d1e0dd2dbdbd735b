"""Cluster Toolkit's own blueprint expansion rules that change what a TPU pool is, as the fake
gcluster (sandbox/bin/gcluster) and an existing cluster's model apply them.

Source: GoogleCloudPlatform/cluster-toolkit at 1047080 (what `fetch` gave, June 2026; the rule
came in 4cea3b8, first released in v1.86.0, so the tutorial's v1.103.0 has it):
- pkg/config/expand.go, `expandModule`: every module goes through `expandHardwareSettings`.
- pkg/config/hardware.go, `expandHardwareSettings`: when the module has no `static_node_count`
  key, has a topology (`tpu_topology`, or `placement_policy.tpu_topology`) and a TPU
  `machine_type` (`IsTPU`: prefix "ct" or "tpu" in the name), and `enable_flex_start` is not
  true, it sets `static_node_count` to `CalculateAcceleratorNodes`: chips of the topology
  divided by the "-<n>t" suffix of the machine type (ct6e-standard-4t, 4x8: 8).
- modules/compute/gke-node-pool/main.tf: `node_count = var.static_node_count`, and
  `dynamic "autoscaling" { for_each = local.static_node_set ? [] : [1] }`: a pool with a static
  count has no autoscaling block, whatever autoscaling_min/max_node_count say; and the
  precondition "enable_flex_start does not work with static_node_count".
"""

from __future__ import annotations

import re
from math import prod
from typing import Any

NODE_POOL_SOURCE = "modules/compute/gke-node-pool"
_VAR = re.compile(r"^\$\(vars\.(\w+)\)$")
_CHIPS_PER_VM = re.compile(r"-(\d+)t$")


def _value(value: Any, variables: dict[str, Any]) -> Any:
    m = _VAR.match(str(value)) if isinstance(value, str) else None
    return variables.get(m.group(1)) if m else value


def _is_tpu(machine_type: str) -> bool:
    lower = machine_type.lower()
    return lower.startswith("ct") or "tpu" in lower


def accelerator_nodes(machine_type: str, topology: str) -> int:
    """CalculateAcceleratorNodes for the machine types the sandbox knows ("-<n>t" suffix)."""
    chips = prod(int(d) for d in topology.split("x"))
    per_vm = _CHIPS_PER_VM.search(machine_type)
    if per_vm is None or chips % int(per_vm.group(1)):
        raise ValueError(f"topology {topology!r} does not divide into {machine_type!r} VMs")
    return chips // int(per_vm.group(1))


def expand_hardware_settings(settings: dict[str, Any], variables: dict[str, Any]) -> None:
    """expandHardwareSettings on one module's settings (in place)."""
    if "static_node_count" in settings:
        return
    placement = _value(settings.get("placement_policy"), variables) or {}
    topology = _value(settings.get("tpu_topology"), variables) or _value(
        placement.get("tpu_topology") if isinstance(placement, dict) else None, variables
    )
    machine = _value(settings.get("machine_type"), variables)
    if not topology or not isinstance(machine, str) or not _is_tpu(machine):
        return
    if _value(settings.get("enable_flex_start"), variables) is True:
        return
    settings["static_node_count"] = accelerator_nodes(machine, str(topology))


def expand_blueprint(blueprint: dict[str, Any]) -> None:
    """The rule on every module of the blueprint (in place), as gcluster's expandModule does."""
    variables = blueprint.get("vars") or {}
    for group in blueprint.get("deployment_groups") or []:
        for module in group.get("modules") or []:
            if module.get("settings"):
                expand_hardware_settings(module["settings"], variables)


def precondition_refusal(settings: dict[str, Any], variables: dict[str, Any]) -> str | None:
    """gke-node-pool's precondition a flex-start pool with a static count fails (terraform)."""
    flex = _value(settings.get("enable_flex_start"), variables) is True
    if flex and settings.get("static_node_count") is not None:
        return (
            "Resource precondition failed: enable_flex_start does not work with "
            "static_node_count. static_node_count should be set to null."
        )
    return None


# What terraform plans when a deployed blueprint is deployed again with other settings (a
# capacity ladder's next rung), for the resources whose zones the ladder touches:
# - gke-cluster/main.tf (cluster-toolkit 1047080) lines 132, 434, 533: the cluster's
#   `node_locations`, the system pool's and `cpu-np`'s all read var.system_node_pool_zones;
#   gke-node-pool/main.tf line 108: the TPU pool's `node_locations = var.zones`.
# - terraform-provider-google resource_container_node_pool.go (e03b762) lines 510-516: `name`
#   is ForceNew; lines 418-424: `node_locations` is not (updated in place); the capacity
#   settings (`spot`, `flex_start`, `reservation_affinity` in node_config) force a new pool.
# - GKE API (container.v1 ClusterUpdate.desiredLocations): "changing cluster locations will
#   update the locations of all node pools and will result in nodes being added and/or removed".
CLUSTER_SOURCE = "modules/scheduler/gke-cluster"
_FORCE_NEW = ("name", "spot", "enable_flex_start", "reservation_affinity")


def _zones(value: Any, variables: dict[str, Any]) -> list[str]:
    return [str(_value(z, variables)) for z in (_value(value, variables) or [])]


def located_resources(blueprint: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """terraform address -> the settings that decide update or replace, with node_locations."""
    variables = blueprint.get("vars") or {}
    found: dict[str, dict[str, Any]] = {}
    for group in blueprint.get("deployment_groups") or []:
        for module in group.get("modules") or []:
            settings = module.get("settings") or {}
            if module.get("source") == CLUSTER_SOURCE:
                zones = _zones(settings.get("system_node_pool_zones"), variables)
                found["google_container_cluster.gke_cluster"] = {"node_locations": zones}
                found["google_container_node_pool.system_node_pools[0]"] = {"node_locations": zones}
                if _value(settings.get("enable_pathways_for_tpus"), variables):
                    found["google_container_node_pool.cpu_np[0]"] = {"node_locations": zones}
            elif module.get("source") == NODE_POOL_SOURCE:
                keyed = {k: _value(settings.get(k), variables) for k in _FORCE_NEW}
                keyed["node_locations"] = _zones(settings.get("zones"), variables)
                found[f"module.{module.get('id')}.google_container_node_pool.node_pool[0]"] = keyed
    return found


def planned_changes(earlier: dict[str, Any] | None, blueprint: dict[str, Any]) -> dict[str, str]:
    """What terraform does to each located resource of `earlier`'s deployment when `blueprint`
    is applied: "replace" (a ForceNew setting changed), "update in place" (its node_locations
    changed; for the cluster, GKE then moves every node pool), or nothing (left out)."""
    if not earlier:
        return {}
    before, after = located_resources(earlier), located_resources(blueprint)
    changes = {}
    for address, now in after.items():
        was = before.get(address)
        if was is None:
            continue
        if any(was.get(k) != now.get(k) for k in _FORCE_NEW if k in now):
            changes[address] = "replace"
        elif was["node_locations"] != now["node_locations"]:
            changes[address] = "update in place"
    return changes
