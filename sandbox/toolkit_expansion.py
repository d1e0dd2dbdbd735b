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
- pkg/config/hardware.go, `extractTopologyFromWorkloadPolicy` (d6e60ef, May 2026, first released
  in v1.91.0): a pool with neither topology setting takes the `accelerator_topology` of the
  `workload_policy` of a module it `use`s (gke-tpu-7x's pool, examples/gke-tpu-7x/gke-tpu-7x.yaml).
- modules/compute/gke-node-pool/main.tf: `node_count = var.static_node_count`, and
  `dynamic "autoscaling" { for_each = local.static_node_set ? [] : [1] }`: a pool with a static
  count has no autoscaling block, whatever autoscaling_min/max_node_count say; and the
  precondition "enable_flex_start does not work with static_node_count".
"""

from __future__ import annotations

import hashlib
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


def used_workload_policy(
    module: dict[str, Any], modules: dict[str, dict[str, Any]], variables: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """The id and `workload_policy` (vars resolved) of the first module `module` uses that has
    one: a resource-policy module (modules/compute/resource-policy), or None."""
    for used in module.get("use") or []:
        policy = ((modules.get(used) or {}).get("settings") or {}).get("workload_policy")
        policy = _value(policy, variables)
        if isinstance(policy, dict):
            return used, {k: _value(v, variables) for k, v in policy.items()}
    return None


def policy_name(
    module_id: str, modules: dict[str, dict[str, Any]], variables: dict[str, Any]
) -> str:
    """The name a resource-policy module gives its policy: modules/compute/resource-policy/
    main.tf (cluster-toolkit 1047080) lines 16-22, `"${var.name}-${random_id...hex}"`: a 4-byte
    random suffix, here a stable one (the module id's digest) so a redeploy keeps it."""
    name = _value(((modules.get(module_id) or {}).get("settings") or {}).get("name"), variables)
    return f"{name}-{hashlib.sha256(module_id.encode()).hexdigest()[:8]}"


def placement_policy(
    module: dict[str, Any], modules: dict[str, dict[str, Any]], variables: dict[str, Any]
) -> dict[str, Any]:
    """The node pool's `placement_policy` as gke-node-pool receives it: the explicit setting,
    else the `placement_policy` output of a used resource-policy module (modules/README.md,
    "Use": an explicit setting comes first, then used modules' outputs). That output
    (resource-policy/outputs.tf lines 17-30): type COMPACT, the policy's name, and the workload
    policy's accelerator_topology as tpu_topology."""
    settings = module.get("settings") or {}
    explicit = _value(settings.get("placement_policy"), variables)
    if isinstance(explicit, dict):
        return {k: _value(v, variables) for k, v in explicit.items()}
    used = used_workload_policy(module, modules, variables)
    if used is None or not used[1].get("type"):
        return {}
    return {
        "type": "COMPACT",
        "name": policy_name(used[0], modules, variables),
        "tpu_topology": used[1].get("accelerator_topology"),
    }


def pool_topology(
    module: dict[str, Any], modules: dict[str, dict[str, Any]], variables: dict[str, Any]
) -> str | None:
    """extractTopology: `tpu_topology`, else `placement_policy.tpu_topology`, else the used
    workload policy's `accelerator_topology`."""
    settings = module.get("settings") or {}
    explicit = _value(settings.get("placement_policy"), variables)
    topology = _value(settings.get("tpu_topology"), variables) or (
        _value(explicit.get("tpu_topology"), variables) if isinstance(explicit, dict) else None
    )
    if not topology and (used := used_workload_policy(module, modules, variables)):
        topology = used[1].get("accelerator_topology")
    return str(topology) if topology else None


def expand_hardware_settings(
    settings: dict[str, Any],
    variables: dict[str, Any],
    module: dict[str, Any] | None = None,
    modules: dict[str, dict[str, Any]] | None = None,
) -> None:
    """expandHardwareSettings on one module's settings (in place); `module` (whose settings
    these are) and the blueprint's `modules` by id let it read a used workload policy."""
    if "static_node_count" in settings:
        return
    topology = pool_topology({**(module or {}), "settings": settings}, modules or {}, variables)
    machine = _value(settings.get("machine_type"), variables)
    if not topology or not isinstance(machine, str) or not _is_tpu(machine):
        return
    if _value(settings.get("enable_flex_start"), variables) is True:
        return
    settings["static_node_count"] = accelerator_nodes(machine, str(topology))


def expand_blueprint(blueprint: dict[str, Any]) -> None:
    """The rule on every module of the blueprint (in place), as gcluster's expandModule does."""
    variables = blueprint.get("vars") or {}
    modules = blueprint_modules(blueprint)
    for module in modules.values():
        if module.get("settings"):
            expand_hardware_settings(module["settings"], variables, module, modules)


def blueprint_modules(blueprint: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The blueprint's modules by id."""
    return {
        str(m.get("id")): m
        for group in blueprint.get("deployment_groups") or []
        for m in group.get("modules") or []
    }


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
