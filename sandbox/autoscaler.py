"""GKE's cluster autoscaler for TPU slice pools, and node repair, on the simulated clock.

A flex-start or Spot pool (autoscaling 0..hosts) has no node until a pod needs one: the pod
stays Pending (FailedScheduling, then the autoscaler's TriggeredScaleUp) and after
`provisioning_delay_s` the WHOLE slice appears at once, as GKE creates multi-host TPU slices
atomically. A slice on which no pod has run for `scale_down_idle_s` is removed, all its
nodes together. Nodes a static pool lost (a preemption, a host error) are recreated after the
same delay, as the node pool's instance group does. A pool whose zone has no VMs of its mode
(sandbox/zone_capacity.py) is not scaled up: its pods get GKE's FailedScaleUp instead.
A flex-start node is created with GKE's max-run-duration label and termination annotation
(max_run_duration.py): it is taken away when its `flex_max_run_s` is over.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sandbox import kube_events, max_run_duration
from sandbox.cluster_model import POOL_LABEL, NodePool
from sandbox.kube_state import ClusterState
from sandbox.zone_capacity import ENV, stocked_out


class Autoscaler:
    """Scale-ups in flight (pool -> simulated time the nodes appear) and idle slices."""

    def __init__(
        self,
        emu: ClusterState,
        clock: Callable[[], float],
        provisioning_delay_s: float = 0.0,
        scale_down_idle_s: float = 600.0,
        flex_max_run_s: int = max_run_duration.DEFAULT_MAX_RUN_S,
        wall_at: Callable[[float], datetime] | None = None,
    ) -> None:
        """`wall_at`: the wall-clock instant of a simulated time (the controller's SimClock;
        by default a simulated second is a wall second)."""
        self.emu, self.clock = emu, clock
        self.provisioning_delay_s, self.scale_down_idle_s = provisioning_delay_s, scale_down_idle_s
        self.flex_max_run_s = flex_max_run_s
        self.wall_at = wall_at or (
            lambda at: datetime.now(UTC) + timedelta(seconds=at - self.clock())
        )
        self._due: dict[str, float] = {}  # pool -> when its missing nodes are created
        self._told: set[tuple[str, str]] = set()  # (pod uid, pool) TriggeredScaleUp sent
        self._busy: dict[str, float] = {}  # pool -> last time a pod was bound to its nodes
        self._used: set[str] = set()  # pools with a pod on their nodes at the last pass

    def _stocked_out(self, pool: NodePool) -> bool:
        """The pool's zone has no VMs of its mode now (a stockout window): a scale-up fails, and
        a static pool's lost nodes are not recreated (its instance group's creates fail alike)."""
        return stocked_out(os.environ.get(ENV, ""), pool.capacity, self._zone()) is not None

    def _zone(self) -> str:
        return self.emu.cluster.zone if self.emu.cluster is not None else ""

    def request(self, pod: dict[str, Any], pool: NodePool, count: int) -> None:
        """A pending pod fits a node of `pool` (it has `count` nodes): scale it up to max, unless
        the pool's zone has no VMs of its mode (a stockout window): then GKE's FailedScaleUp."""
        name = pool.name
        if name not in self._due and self._stocked_out(pool):
            self._refuse(pod, pool, self._zone())
            return
        if name not in self._due:
            self._due[name] = self.clock() + self.provisioning_delay_s
        if (pod["metadata"]["uid"], name) in self._told:
            return
        self._told.add((pod["metadata"]["uid"], name))
        self.emu.create(
            kube_events.event(
                pod,
                "TriggeredScaleUp",
                f"pod triggered scale-up: [{{{name} {count}->{pool.max_nodes} "
                f"(max: {pool.max_nodes})}}]",
                "cluster-autoscaler",
                "Normal",
            )
        )

    def _refuse(self, pod: dict[str, Any], pool: NodePool, zone: str) -> None:
        """GKE cluster autoscaler's event on a pod whose scale-up failed for lack of VMs: its
        events package's failedScaleUpReason, zonalErrorMessageTemplate and
        outOfResourcesMessage ("GCE out of resources")."""
        if (pod["metadata"]["uid"], f"refused:{pool.name}") in self._told:
            return
        self._told.add((pod["metadata"]["uid"], f"refused:{pool.name}"))
        self.emu.create(
            kube_events.event(
                pod,
                "FailedScaleUp",
                f"Node scale up in zones {zone} associated with this pod failed: GCE out of "
                "resources. Pod is at risk of not being scheduled.",
                "cluster-autoscaler",
                "Warning",
            )
        )

    def reconcile(self) -> None:
        model = self.emu.cluster
        if model is None or not model.running:
            return
        now = self.clock()
        nodes = self.emu.list_shared("nodes")
        pods = [
            p
            for p in self.emu.list_shared("pods")
            if p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded", "Failed")
        ]
        for pool in model.pools:
            mine = [
                n for n in nodes if (n["metadata"].get("labels") or {}).get(POOL_LABEL) == pool.name
            ]
            names = {n["metadata"]["name"] for n in mine}
            used = any(p["spec"]["nodeName"] in names for p in pods)
            if used or pool.name in self._used:  # idle from the first pass that sees it idle
                self._busy[pool.name] = now
            self._used.discard(pool.name)
            if used:
                self._used.add(pool.name)
            target = pool.max_nodes if pool.name in self._due else pool.nodes
            if (
                len(mine) < pool.nodes
                and pool.name not in self._due
                and not self._stocked_out(pool)
            ):
                self._due[pool.name] = now + self.provisioning_delay_s  # repair a static pool
            if pool.name in self._due and now >= self._due[pool.name]:
                del self._due[pool.name]
                with self.emu.ledger.nodes_arriving_at(now):
                    self._create_missing(model, pool, names, max(target, pool.nodes), now)
            elif self._idle(pool, now) and mine:
                for node in mine:
                    self.emu.delete("nodes", "", node["metadata"]["name"])

    def _idle(self, pool: NodePool, now: float) -> bool:
        """A scale-from-zero slice no pod has used for `scale_down_idle_s` (GKE scale-down)."""
        if not (pool.scales_from_zero and pool.slice_hosts) or pool.name in self._due:
            return False
        return now - self._busy.setdefault(pool.name, now) >= self.scale_down_idle_s

    def _create_missing(
        self, model: Any, pool: NodePool, present: set[str], target: int, at: float
    ) -> None:
        """The pool's missing nodes, arriving at simulated `at`; a flex-start node ends
        `flex_max_run_s` later (on the simulated clock; its annotation says when, wall)."""
        index = 0
        for _ in range(target - len(present)):
            while pool.node(model.name, model.zone, index)["metadata"]["name"] in present:
                index += 1
            node = pool.node(model.name, model.zone, index)
            present.add(node["metadata"]["name"])
            if pool.capacity == "flex_start":
                ends = self.wall_at(at + self.flex_max_run_s)
                max_run_duration.mark(node, self.flex_max_run_s, ends)
            self.emu.create(node)
        self._busy[pool.name] = self.clock()
