"""TPU capacity modes: the blueprint's TPU pool edits (made as Cluster Toolkit's consumption-options
examples make them), the deployment vars each mode sets, and the node label TPU pods select.

`reservation` is the tutorial's static pool in a SPECIFIC_RESERVATION, left as it is. `flex_start`
pools scale from zero nodes: GKE adds a slice's hosts when TPU pods wait for them and removes them
when idle. `spot` is a STATIC pool of Spot VMs, from deploy to destroy, because that is what
gcluster renders: its expandHardwareSettings (pkg/config/hardware.go, GoogleCloudPlatform/
cluster-toolkit at 1047080) sets `static_node_count` to the slice's hosts on every pool with a TPU
machine type and a topology that has none, unless `enable_flex_start` is true; and gke-node-pool's
main.tf (`dynamic "autoscaling"`, for_each = local.static_node_set ? [] : [1]) then renders no
autoscaling block. So a Spot slice bills for the cluster's whole life, and a Spot stockout fails
the deploy itself rather than making pods wait. Queued provisioning
(`enable_queued_provisioning`, a ProvisioningRequest admission check in Kueue) is deliberately not
used: GKE once refused TPU flex-start node pools with queued provisioning, and plain flex-start
needs no Kueue change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tpu_rl.settings.capacity_modes import (
    MAX_NODES_VAR,
    RESERVATION_VAR,
    CapacityEnd,
    RunValue,
    capacity_mode,
)

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

POOL_ANCHOR = "disk_size_gb"  # the mode's settings follow it, as in the example
# Compute Engine's words for a zone without the VMs asked for ("Troubleshooting resource
# availability errors", https://cloud.google.com/compute/docs/troubleshooting/
# troubleshooting-resource-availability), GKE's node pool error code for the same, and GKE's
# "Node pool creation fails due to resource availability" messages (https://cloud.google.com/
# kubernetes-engine/docs/troubleshooting/node-pools: "resource pool exhausted",
# ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS]); and Compute Engine's answer when the run's
# specific reservation has no VM free (used by others), as GKE's cluster autoscaler matches it
# (kubernetes/autoscaler, cluster-autoscaler/cloudprovider/gce/autoscaling_gce_client.go,
# isReservationCapacityExceeded: "Specified reservation (.*) does not have available resources
# for the request.", RESERVATION_CAPACITY_EXCEEDED).
# The autoscaler's other out-of-resources words (same file at 55c37cd, August 2026):
# isResourcePoolExhaustedErrorCode (lines 686-688) takes RESOURCE_POOL_EXHAUSTED beside the ZONE_
# codes (matched here as a substring, so one marker covers all three), and
# isInsufficientCapacityErrorCode (690-692) INSUFFICIENT_CAPACITY (both OutOfResourcesErrorClass);
# isReservationIncompatible (734-737) "No available resources in specified reservations": the
# named reservations have no VM free for the request (a rung with another after it is worth
# trying then). Matched without regard to case: GKE's troubleshooting page and Compute Engine
# write the same words in both cases ("resource pool exhausted").
STOCKOUT_MARKERS = (
    "RESOURCE_POOL_EXHAUSTED",
    "INSUFFICIENT_CAPACITY",
    "GCE_STOCKOUT",
    "does not have enough resources available",
    "resource pool exhausted",
    "does not have available resources for the request",
    "No available resources in specified reservations",
)
# terraform-provider-google's words when a node pool's create outlives its `timeouts.create`
# (resource_container_node_pool.go at e03b762: ContainerOperationWait(..., "creating GKE
# NodePool", ..., timeout), line 904; tpgresource/common_operation.go OperationWait, line 170:
# "Error waiting for %s: %w"; terraform-plugin-sdk retry.TimeoutError: "timeout while waiting
# for state to become 'DONE' (last state: 'RUNNING', timeout: 30m0s)"). The provider's own
# comment there (lines 921-923): "Common cause for that is GCE_STOCKOUT which will wait for
# resources and return error after timeout". On a ladder rung it counts as no capacity there.
CREATE_TIMEOUT_MARKERS = ("creating GKE NodePool", "timeout while waiting for state")
# GKE waits for a static pool's instance group this long before it fails the create with the
# IGM's errors ("Google Compute Engine: Not all instances running in IGM after 35m4.03s.
# Expected 5, running 2, transitioning 3. Current errors: [GCE_STOCKOUT]: ..." in
# akka/akka-core#32992 and GoogleCloudPlatform/cluster-toolkit#6278, September 2026).
GKE_IGM_WAIT_MINUTES = 35
# The TPU pool's terraform create timeout (gke-node-pool `timeout_create`, default null:
# modules/compute/gke-node-pool/variables.tf lines 299-303, main.tf `timeouts { create =
# var.timeout_create }` lines 304-307, cluster-toolkit 1047080). The provider's default is 30
# minutes up to v7.29 (below GKE's wait: terraform fails first, with no stockout word), 60 from
# v7.30.0 (8b1d15a, #27101), 2 hours from v7.42.0 (1839045, #28382); gke-node-pool's versions.tf
# admits google-beta >= 7.24.0, so the product sets it above GKE's wait: GKE's own stockout
# answer comes first whatever provider terraform init picks.
POOL_CREATE_TIMEOUT = f"{GKE_IGM_WAIT_MINUTES + 10}m"


def scales_from_zero(settings: RunSettings) -> bool:
    """Whether the TPU pool has nodes only while pods need them (flex-start only; see above)."""
    return not capacity_mode(settings.capacity).static_pool


def slice_hosts(settings: RunSettings) -> int:
    """Hosts (VMs, one pod each) of one of the run's slices."""
    return settings.slices.hosts_per_slice


def _marked(line: str, markers: tuple[str, ...]) -> bool:
    lower = line.lower()
    return any(m.lower() in lower for m in markers)


def stockout_line(gcluster_output: str) -> str | None:
    """GKE's own line saying the zone had no capacity for the TPU pool, or None."""
    for line in gcluster_output.splitlines():
        if _marked(line, STOCKOUT_MARKERS):
            return line.strip()
    return None


def create_timeout_line(gcluster_output: str) -> str | None:
    """terraform's line saying a node pool's create outlived its timeout, or None."""
    for line in gcluster_output.splitlines():
        if all(_marked(line, (m,)) for m in CREATE_TIMEOUT_MARKERS):
            return line.strip()
    return None


def no_capacity_line(gcluster_output: str) -> str | None:
    """Why a ladder rung's deploy means no capacity there: GKE's stockout line, else terraform's
    create timeout (a static pool still waiting for its VMs); None for any other failure."""
    return stockout_line(gcluster_output) or create_timeout_line(gcluster_output)


def deploy_stockout(settings: RunSettings, gcluster_output: str) -> str | None:
    """What a failed Spot deploy means when the zone had no Spot VMs: a static pool gets its
    slice at creation or not at all, so a stockout fails the deploy, nothing waits; or None."""
    mode = capacity_mode(settings.capacity)
    if not mode.static_without_reservation or no_capacity_line(gcluster_output) is None:
        return None
    hosts = slice_hosts(settings)
    return (
        f"Spot stockout: {settings.zone} had no {hosts} Spot {settings.compute_type} VMs for the "
        "TPU pool. gcluster makes a Spot pool static (its nodes are created with the cluster), "
        "so a stockout fails the deploy rather than waiting for capacity: try again later, "
        "another zone, or capacity=flex_start (which waits for a slice)"
    )


def node_selector(settings: RunSettings) -> dict[str, str]:
    """The mode's GKE node label, for TPU pods to select (GKE's docs ask for it)."""
    label = capacity_mode(settings.capacity).node_label
    return {label: "true"} if label else {}


def capacity_vars(settings: RunSettings) -> dict[str, Any]:
    """The blueprint vars the mode sets: the reservation, Spot's switch, or flex-start's switch
    and the pool's bounds (per slice: the module makes one pool per slice), as the example's
    deployment file says."""
    run_values: dict[RunValue, object] = {
        RunValue.RESERVATION: settings.reservation,
        RunValue.SLICE_HOSTS: slice_hosts(settings),
    }
    return {
        key: run_values[value] if isinstance(value, RunValue) else value
        for key, value in capacity_mode(settings.capacity).blueprint_vars.items()
    }


def edit_vars(variables: dict[str, Any], settings: RunSettings) -> dict[str, Any]:
    """Blueprint vars of a mode without a reservation: the reservation var gives way to the mode's
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
    """The TPU pool's settings for flex_start (no reservation, autoscaling from zero) or spot (no
    reservation, Spot VMs; gcluster adds the static count)."""
    mode = capacity_mode(settings.capacity)
    added, dropped = mode.pool_settings, mode.dropped_pool_settings
    kept = {k: v for k, v in pool_settings.items() if k not in (*dropped, *added)}
    if POOL_ANCHOR not in kept:
        return {**kept, **added}
    edited: dict[str, Any] = {}
    for key, value in kept.items():
        edited[key] = value
        if key == POOL_ANCHOR:
            edited |= added
    return edited


def edit_static_counts(node: Any, pool_id: str, settings: RunSettings) -> Any:
    """With flex-start, every `<pool>.node_count_static` (Kueue's tpu_quota, the fio job's
    node_count) reads vars.autoscaling_max_node_count instead, as the example does: the pool has
    no static nodes. A Spot pool keeps them (gcluster sets static_node_count)."""
    if not scales_from_zero(settings):
        return node
    if isinstance(node, dict):
        return {k: edit_static_counts(v, pool_id, settings) for k, v in node.items()}
    if isinstance(node, list):
        return [edit_static_counts(v, pool_id, settings) for v in node]
    if isinstance(node, str):
        return node.replace(f"{pool_id}.node_count_static", f"vars.{MAX_NODES_VAR}")
    return node


def describe_edits(settings: RunSettings) -> list[str]:
    """The blueprint edits of the mode, in words, for the plan."""
    mode = capacity_mode(settings.capacity)
    if mode.takes_reservation:
        window = " in its calendar window" if mode.ends is CapacityEnd.WINDOW_END else ""
        return [
            f"none: the tutorial's static TPU pool in reservation {settings.reservation}{window}"
        ]
    edits = [
        f"vars: {RESERVATION_VAR} removed; {_listed(capacity_vars(settings))} (deployment file)",
        f"TPU pool: reservation_affinity removed; {_listed(mode.pool_settings)}",
    ]
    if scales_from_zero(settings):
        return [
            *edits,
            f"<pool>.node_count_static (Kueue tpu_quota, fio job node_count) -> "
            f"vars.{MAX_NODES_VAR}",
        ]
    hosts = slice_hosts(settings)
    return [
        *edits,
        f"gcluster adds static_node_count={hosts} (its expandHardwareSettings, for every TPU pool "
        "not on flex-start): a static pool of Spot VMs from deploy to destroy, no autoscaling",
    ]


def _listed(values: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
