"""A TPU node taken away mid-training, as GKE shows a Spot preemption.

The node gets the `cloud.google.com/impending-node-termination:NoSchedule` taint (the notice,
30 s for Spot VMs); when the notice runs out the kubelet's graceful node shutdown ends its pods
(phase Failed, reason Terminated, a DisruptionTarget condition) and the Node is deleted. The
terminated pods are kept (no pod GC here) so their evidence stays readable. A flex-start node
whose maximum run duration is over goes the same way (`expire`, max_run_duration.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sandbox import max_run_duration
from sandbox.cluster_model import POOL_LABEL, TPU
from sandbox.kube_state import ClusterState, timestamp
from sandbox.ledger import Attempt, Ledger
from sandbox.pod_scripts import ContainerExit, PodInfo
from sandbox.scheduler import pod_requests
from sandbox.workloads import GRPC_UNAVAILABLE, absl

IMPENDING_TAINT = {
    "key": "cloud.google.com/impending-node-termination",
    "value": "",
    "effect": "NoSchedule",
}
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
SPOT_NOTICE_S = 30.0


class Preemption:
    """Preempts nodes on request; `lost[run]` is when a run's pods lost their node."""

    def __init__(
        self,
        emu: ClusterState,
        clock: Callable[[], float],
        run_label: str,
        notice_s: float = SPOT_NOTICE_S,
    ) -> None:
        self.emu, self.clock, self.run_label, self.notice_s = emu, clock, run_label, notice_s
        self._due: dict[str, float] = {}  # node -> when it shuts down
        self.lost: dict[str, float] = {}
        self._run_due: dict[str, float] = {}  # run -> when its preempted node shuts down
        self.preempted: list[str] = []  # node names, in order
        self.expired: list[str] = []  # flex-start nodes whose max run duration ended, in order
        # a calendar reservation's end (wall clock): Compute Engine deletes its VMs then
        # ("terminated at specified end time along with terminating the VMs running on it",
        # Compute v1 FutureReservation.ReservationMode CALENDAR)
        self.calendar_end: datetime | None = None

    def preempt_run(self, run: str) -> str | None:
        """Preempt the node of one running TPU pod of this run (None: it has none)."""
        for pod in self.emu.list("pods", label_selector=f"{self.run_label}={run}"):
            node = pod["spec"].get("nodeName")
            if (
                pod["status"].get("phase") == "Running"
                and node
                and TPU in pod_requests(pod["spec"])
            ):
                self.preempt(node)
                self._run_due.setdefault(run, self._due.get(node, self.clock()))
                return node
        return None

    def lost_at(self, run: str) -> float | None:
        """When the run last lost a TPU node on the simulated clock: a preempted node's
        shutdown time as soon as it has passed, whether or not a reconcile has yet ended its
        pods (a controller tick may come a step late at a small time scale)."""
        due = self._run_due.get(run)
        if due is not None and due <= self.clock():
            self.lost[run] = max(self.lost.get(run, due), due)
            del self._run_due[run]
        return self.lost.get(run)

    def preempt(self, node: str) -> None:
        """The notice: taint the node now, shut it down `notice_s` later."""
        current = self.emu.get("nodes", "", node)
        if current is None or node in self._due:
            return
        taints = [*((current.get("spec") or {}).get("taints") or []), dict(IMPENDING_TAINT)]
        self.emu.patch("nodes", "", node, {"spec": {"taints": taints}})
        self._due[node] = self.clock() + self.notice_s
        self.preempted.append(node)

    def expire(self) -> None:
        """GKE's end of a node's time: a flex-start VM's run duration (its termination
        annotation) or a calendar reservation's end (a reserved pool's TPU nodes). A node whose
        end (wall clock, mapped onto the simulated clock by the ledger's SimClock) is within
        `max_run_duration.NOTICE_S` shuts down at that time, as a preempted one does."""
        clock, now = self.emu.ledger.clock, self.clock()
        for node in self.emu.list_shared("nodes"):
            name, ends = node["metadata"]["name"], self._end_of(node)
            if ends is None or name in self._due:
                continue
            due = clock.simulated_at(ends)
            if now >= due - max_run_duration.NOTICE_S:
                self._due[name] = due
                self.expired.append(name)

    def _end_of(self, node: dict[str, Any]) -> datetime | None:
        """When the node's VM is taken away (wall clock); None: nothing says it will be."""
        if (ends := max_run_duration.termination(node)) is not None:
            return ends
        return self.calendar_end if self.calendar_end and self._reserved(node) else None

    def _reserved(self, node: dict[str, Any]) -> bool:
        """A TPU node of a pool drawn from a reservation."""
        model = self.emu.cluster
        pool = (
            model.pool((node["metadata"].get("labels") or {}).get(POOL_LABEL, ""))
            if model
            else None
        )
        return pool is not None and pool.capacity == "reservation" and bool(pool.slice_hosts)

    def reconcile(self) -> None:
        now = self.clock()
        for node in [n for n, due in self._due.items() if now >= due]:
            del self._due[node]
            for pod in self.emu.list_shared("pods"):
                if pod["spec"].get("nodeName") == node:
                    self._terminate(pod, now)
            self.emu.delete("nodes", "", node)

    def _terminate(self, pod: dict[str, Any], now: float) -> None:
        meta = pod["metadata"]
        if pod["status"].get("phase") in ("Succeeded", "Failed"):
            return
        run = (meta.get("labels") or {}).get(self.run_label)
        if run:
            self.lost[run] = now
        at = timestamp()
        conditions = [
            {"type": t, "status": status, "lastProbeTime": None, "lastTransitionTime": at, **why}
            for t, status, why in (
                ("DisruptionTarget", "True",
                 {"reason": "TerminationByKubelet", "message": SHUTDOWN_MESSAGE}),
                ("PodScheduled", "True", {}),
                ("Initialized", "True", {}),
                ("ContainersReady", "False", {"reason": "PodFailed"}),
                ("Ready", "False", {"reason": "PodFailed"}),
            )
        ]  # fmt: skip
        ns, name = meta["namespace"], meta["name"]
        self.emu.set_pod_phase(
            ns,
            name,
            "Failed",
            exit_code=143,
            conditions=conditions,
            pod_reason="Terminated",
            message=SHUTDOWN_MESSAGE,
        )


def worker_slice_check(emu: ClusterState) -> Callable[[PodInfo], None]:
    """A Pathways worker's health: a pod that ran on its whole slice dies (exit 1, and again
    after each restart) while the slice misses a host; a pod that has not yet seen its whole
    slice waits for the missing host (a fresh backend on a slice being repaired)."""
    whole: set[str] = set()  # pods that have run on their complete slice

    def check(info: PodInfo) -> None:
        pod = emu.get_shared("pods", info.namespace, info.pod) or {"spec": {}}
        node = emu.get_shared("nodes", "", pod["spec"].get("nodeName") or "")
        model = emu.cluster
        if node is None or model is None:
            return
        pool = model.pool((node["metadata"].get("labels") or {}).get(POOL_LABEL, ""))
        if pool is None or not pool.slice_hosts:
            return
        hosts = emu.list_shared("nodes", label_selector=f"{POOL_LABEL}={pool.name}")
        if len(hosts) >= pool.slice_hosts:
            whole.add(info.pod)
        elif info.pod in whole:
            raise ContainerExit(1, absl("F", SLICE_LOST, "tpu_worker.cc:538")())

    return check


SLICE_LOST = (
    "Check failed: slice_healthy: lost ICI connection to a host of this slice "
    "(DEADLINE_EXCEEDED: peer did not answer within 30s)"
)


@dataclass
class ClientFaults:
    """A GRPO client attempt's hooks: record its steps in the ledger, preempt a TPU node of
    its run when it logs one of `at_steps` (each once per run), and die with gRPC UNAVAILABLE
    at the next step once its backend lost a host after the attempt started."""

    ledger: Ledger
    preemption: Preemption | None
    at_steps: tuple[int, ...] = ()
    fired: set[int] = field(default_factory=set)

    def hooks(
        self, attempt: Attempt, run: str, last_step: int, fail_step: int | None = None
    ) -> tuple[Callable[[PodInfo, int], None], Callable[[PodInfo, int], None]]:
        def before_step(_info: PodInfo, step: int) -> None:
            lost = self.preemption.lost_at(run) if self.preemption else None
            if lost is not None and lost > attempt.started:
                self.ledger.end_attempt(attempt, "capacity_lost")
                raise ContainerExit(1, GRPC_UNAVAILABLE)

        def after_step(_info: PodInfo, step: int) -> None:
            self.ledger.step_done(attempt, step)
            if step in self.at_steps and step not in self.fired and self.preemption:
                self.fired.add(step)
                self.preemption.preempt_run(run)
            if step in (fail_step, last_step):
                self.ledger.end_attempt(attempt, "completed" if step == last_step else "error")

        return before_step, after_step
