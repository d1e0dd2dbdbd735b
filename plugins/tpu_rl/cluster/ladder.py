"""The capacity ladder: rungs `mode@zone`, tried in order until one gives the whole TPU slice.

Mechanism: one TPU node pool at a time, made by Cluster Toolkit. A rung is the run's settings
with that rung's capacity mode and zone; moving to the next rung is `gcluster deploy` of the
blueprint rendered for it, so terraform replaces the TPU pool (the old rung's pool and nodes are
deleted: nothing is left billing there) while the regional cluster, its bucket and its
checkpoints stay. The shape on a ladder (tpu_rl.cluster.blueprint.edit_ladder):
- each rung's TPU pool has its own name (the first rung's is the blueprint's), so a move always
  makes a new pool: terraform-provider-google's node pool `name` is ForceNew while its
  `node_locations` is updated in place (resource_container_node_pool.go at e03b762, lines
  418-424 and 510-516), so a flex-start to flex-start move across zones would otherwise move
  the old pool instead of making one;
- the cluster's zones stay the first rung's: Cluster Toolkit's gke-cluster feeds
  `system_node_pool_zones` to the cluster's `node_locations`, the system pool and `cpu-np`
  (modules/scheduler/gke-cluster/main.tf at 1047080, lines 132, 434 and 533), and the GKE API
  moves every node pool when the cluster's locations change (ClusterUpdate.desiredLocations:
  "Warning: changing cluster locations will update the locations of all node pools and will
  result in nodes being added and/or removed", container.v1 discovery document revision
  20261027, as google-api-python-client ships it). So the Pathways head and client pool (`cpu-np`)
  and the system pool stay where the run started; only the TPU pool follows the rung's zone
  (gke-node-pool `zones`: "Zones must be in region of cluster", variables.tf lines 27-31).
  On a rung in another zone the Pathways head (cpu-np) and its TPU workers are in different
  zones: their traffic is inter-zone data transfer, billed (INTER_ZONE_USD_PER_GIB) and slower
  than within a zone; `make plan` and the estimate say so for each such rung (cross_zone_text);
- the TPU pool's terraform create timeout is above GKE's own wait for a static pool's VMs
  (tpu_rl.cluster.capacity.POOL_CREATE_TIMEOUT), so a stockout is GKE's answer, not a timeout.
A move takes the old TPU pool's deletion plus the new pool's creation: minutes for a
flex-start pool (made with no node), up to GKE's 35-minute wait for a static pool's VMs; the
cluster and its other pools are not touched. Not chosen, and why:
- one pool per rung, all made at deploy: gcluster makes every TPU pool not on flex-start static
  (tpu_rl.cluster.capacity), so a Spot rung would bill from deploy to destroy and a stockout on
  any rung would fail the whole deploy;
- a custom ComputeClass with priorities (https://cloud.google.com/kubernetes-engine/docs/
  concepts/about-custom-compute-classes, "Fallback compute priorities"): GKE's fallback to the
  next priority does not wait per rule but, for TPUs and flex-start, is not immediate either
  ("Troubleshoot custom ComputeClass issues",
  https://cloud.google.com/kubernetes-engine/docs/troubleshooting/custom-compute-classes), so
  a rung has no wait limit of the run's; it needs node auto-provisioning rather than the
  tutorial's Cluster Toolkit pools, and the run could not say which rung ran which steps;
- queued provisioning (ProvisioningRequest + Kueue): see tpu_rl.cluster.capacity.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tpu_rl.settings.capacity_modes import capacity_mode
from tpu_rl.settings.rungs import Rung, parse_ladder

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

# Inter-zone VM-to-VM data transfer within a region: USD 0.01 per GiB
# (https://cloud.google.com/vpc/network-pricing, "Inter-zone VM-to-VM data transfer (same
# region)", as transcribed 2026-09-20 in api-evangelist/google-cloud-vpc,
# plans/google-cloud-vpc-plans-pricing.yml).
INTER_ZONE_USD_PER_GIB = 0.01


def rungs(settings: RunSettings) -> list[Rung]:
    """The run's rungs: its ladder, or its one `capacity`@`zone` when the ladder is empty."""
    return parse_ladder(settings.capacity_ladder) or [Rung(settings.capacity, settings.zone)]


def at_rung(settings: RunSettings, rung: Rung) -> RunSettings:
    """The run's settings on `rung`: its mode and zone (a reservation only on a reservation
    rung; the rest of the run, region and bucket included, as it is)."""
    reservation = settings.reservation if capacity_mode(rung.mode).takes_reservation else ""
    return dataclasses.replace(
        settings, capacity=rung.mode, zone=rung.zone, reservation=reservation
    )


def cross_zone_text(cluster_zone: str, rung_zone: str) -> str:
    """What a rung in another zone than the cluster's costs beyond its TPUs, in words."""
    return (
        f"the Pathways head (cpu-np, {cluster_zone}) and its TPU workers ({rung_zone}) are in "
        "different zones: every byte between them is inter-zone transfer at "
        f"${INTER_ZONE_USD_PER_GIB:g} per GiB (https://cloud.google.com/vpc/network-pricing), "
        "not counted (its volume is not known), and each call between them crosses zones"
    )


def rung_index(settings: RunSettings) -> int:
    """The 0-based place of the settings' rung (their mode and zone) on their ladder; 0 without
    one."""
    ladder = rungs(settings)
    rung = Rung(settings.capacity, settings.zone)
    return ladder.index(rung) if rung in ladder else 0


def cluster_zone(settings: RunSettings) -> str:
    """The zone of the cluster's nodes, system pool and `cpu-np` on every rung: the first
    rung's (the run's own `zone`)."""
    return rungs(settings)[0].zone


def wait_s(settings: RunSettings) -> float:
    """How long the current rung (the settings' mode and zone) may take to give the whole
    slice: `rung_wait_seconds` (at most the pending timeout) on a rung with another after it,
    the pending timeout on the last rung or without a ladder."""
    ladder = rungs(settings)
    if Rung(settings.capacity, settings.zone) in ladder[:-1]:
        return rung_wait_s(settings)
    return settings.pending_timeout_minutes * 60.0


def rung_wait_s(settings: RunSettings) -> float:
    """The wait of a rung with another after it: `rung_wait_seconds`, at most the pending
    timeout."""
    return min(float(settings.rung_wait_seconds), settings.pending_timeout_minutes * 60.0)
