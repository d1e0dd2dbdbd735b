"""Cluster Toolkit's own blueprint expansion rules that change what a TPU pool is, as the fake
gcluster (tests/sandbox/bin/gcluster) and an existing cluster's model apply them.

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
