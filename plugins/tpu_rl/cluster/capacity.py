"""TPU capacity modes: the blueprint's TPU pool edits (made as Cluster Toolkit's consumption-options
examples make them), the deployment vars each mode sets, and the node label TPU pods select.

`reservation` is the tutorial's static pool in a SPECIFIC_RESERVATION, left as it is. `flex_start`
and `spot` pools scale from zero nodes: GKE adds a slice's hosts when TPU pods wait for them and
removes them when idle. Queued provisioning (`enable_queued_provisioning`, a ProvisioningRequest
admission check in Kueue) is deliberately not used: GKE once refused TPU flex-start node pools
with queued provisioning, and plain flex-start needs no Kueue change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl.cluster.tpu import hosts_per_slice

if TYPE_CHECKING:
    from tpu_rl.settings.run_settings import RunSettings

RESERVATION, FLEX_START, SPOT = "reservation", "flex_start", "spot"
# GKE's own labels on the nodes of flex-start and Spot pools (a reservation pool has none).
NODE_LABELS = {FLEX_START: "cloud.google.com/gke-flex-start", SPOT: "cloud.google.com/gke-spot"}
RESERVATION_VAR = "reservation"
MAX_NODES_VAR = "autoscaling_max_node_count"
# The pool settings each mode adds, reading the blueprint vars of the same names, as in the
# dws-flex-start/gke-tpu-v6e example (auto_repair false: "flex-start dependency" there).
_AUTOSCALING = {
    "autoscaling_min_node_count": "$(vars.autoscaling_min_node_count)",
    MAX_NODES_VAR: f"$(vars.{MAX_NODES_VAR})",
}
POOL_SETTINGS: dict[str, dict[str, Any]] = {
    FLEX_START: {"enable_flex_start": "$(vars.enable_flex_start)", "auto_repair": False}
    | _AUTOSCALING,
    SPOT: {"spot": "$(vars.spot)"} | _AUTOSCALING,
}
# Pool settings a pool that scales from zero must not have (flex-start takes no static nodes).
DROPPED_POOL_SETTINGS = ("reservation_affinity", "static_node_count")
POOL_ANCHOR = "disk_size_gb"  # the mode's settings follow it, as in the example


def node_selector(settings: RunSettings) -> dict[str, str]:
    """The mode's GKE node label, for TPU pods to select (GKE's docs ask for it)."""
    label = NODE_LABELS.get(settings.capacity)
    return {label: "true"} if label else {}


def capacity_vars(settings: RunSettings) -> dict[str, Any]:
    """The blueprint vars the mode sets: the reservation, or the switch and the pool's bounds.

    A pool that scales from zero holds at most one slice's hosts (per slice: the module makes
    one pool per slice), as the example's deployment file says.
    """
    if settings.capacity == RESERVATION:
        return {RESERVATION_VAR: settings.reservation}
    switch = "enable_flex_start" if settings.capacity == FLEX_START else "spot"
    return {
        switch: True,
        "autoscaling_min_node_count": 0,
        MAX_NODES_VAR: hosts_per_slice(settings.topology, settings.compute_type),
    }


def edit_vars(variables: dict[str, Any], settings: RunSettings) -> dict[str, Any]:
    """Blueprint vars of a pool from zero: the reservation var gives way to the mode's own
    (declared empty or switched on, as the example declares them; the deployment file sets them)."""
    declared = {k: (v if v is True else None) for k, v in capacity_vars(settings).items()}
    edited: dict[str, Any] = {}
    for key, value in variables.items():
        if key == RESERVATION_VAR:
            edited |= declared
        else:
            edited[key] = value
    return edited if RESERVATION_VAR in variables else {**edited, **declared}


def edit_pool(pool_settings: dict[str, Any], settings: RunSettings) -> dict[str, Any]:
    """The TPU pool's settings for flex_start or spot: no reservation, autoscaling from zero."""
    added = POOL_SETTINGS[settings.capacity]
    kept = {k: v for k, v in pool_settings.items() if k not in (*DROPPED_POOL_SETTINGS, *added)}
    if POOL_ANCHOR not in kept:
        return {**kept, **added}
    edited: dict[str, Any] = {}
    for key, value in kept.items():
        edited[key] = value
        if key == POOL_ANCHOR:
            edited |= added
    return edited


def edit_static_counts(node: Any, pool_id: str) -> Any:
    """Every `<pool>.node_count_static` (Kueue's tpu_quota, the fio job's node_count) reads
    vars.autoscaling_max_node_count instead, as the example does: the pool has no static nodes."""
    if isinstance(node, dict):
        return {k: edit_static_counts(v, pool_id) for k, v in node.items()}
    if isinstance(node, list):
        return [edit_static_counts(v, pool_id) for v in node]
    if isinstance(node, str):
        return node.replace(f"{pool_id}.node_count_static", f"vars.{MAX_NODES_VAR}")
    return node


def describe_edits(settings: RunSettings) -> list[str]:
    """The blueprint edits of the mode, in words, for the plan."""
    if settings.capacity == RESERVATION:
        return [f"none: the tutorial's static TPU pool in reservation {settings.reservation}"]
    pool = POOL_SETTINGS[settings.capacity]
    return [
        f"vars: {RESERVATION_VAR} removed; {_listed(capacity_vars(settings))} (deployment file)",
        f"TPU pool: reservation_affinity removed; {_listed(pool)}",
        f"<pool>.node_count_static (Kueue tpu_quota, fio job node_count) -> vars.{MAX_NODES_VAR}",
    ]


def _listed(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
