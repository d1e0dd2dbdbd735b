"""Ground truth for cost and progress, on the simulated clock: node lifetimes, TPU pod run
times and what each GRPO client attempt executed (bench and tests read it, never the product).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

TPU = "google.com/tpu"


class SimClock:
    """Simulated seconds: wall seconds since the clock was made, divided by `scale`.

    Objects carry wall-clock times (creationTimestamp, log lines): `wall_at` and
    `simulated_at` map an instant between the two clocks (simulated 0 is `wall0`).
    """

    def __init__(self, scale: float = 1.0) -> None:
        self.scale, self._t0, self.wall0 = scale, time.monotonic(), datetime.now(UTC)

    def __call__(self) -> float:
        return (time.monotonic() - self._t0) / self.scale

    def wall_at(self, simulated: float) -> datetime:
        """The wall-clock instant (UTC) of a simulated time."""
        return self.wall0 + timedelta(seconds=simulated * self.scale)

    def simulated_at(self, wall: datetime) -> float:
        """The simulated time of a wall-clock instant (timezone-aware)."""
        return (wall - self.wall0).total_seconds() / self.scale


@dataclass
class Lifetime:
    """One object's life on the simulated clock; `ended` None while it lives."""

    name: str
    group: str  # a Node's pool, a pod's Job
    tpu: int
    started: float
    ended: float | None = None

    def seconds(self, until: float) -> float:
        return max(0.0, (self.ended if self.ended is not None else until) - self.started)


@dataclass
class Attempt:
    """One GRPO client process: the step it restored (None: from the base model), the steps
    it executed and when each was logged, and when it started and ended."""

    pod: str
    run_name: str
    started: float
    restored_step: int | None = None
    steps: list[int] = field(default_factory=list)
    step_ends: list[float] = field(default_factory=list)  # when each of `steps` was logged
    ended: float | None = None
    outcome: str = ""  # completed, capacity_lost, error


@dataclass
class Checkpoint:
    """One committed actor checkpoint of a run: `poisoned` when saved at or after a training
    fault (NaN, spike, collapse, KL blow-up), `deleted` when Orbax's rotation removed it."""

    run_name: str
    step: int
    poisoned: bool
    committed: float
    deleted: float | None = None


class Ledger:
    """Thread-safe records, kept by the emulator's ClusterState as objects come and go."""

    def __init__(self) -> None:
        self.clock = SimClock()
        self._lock = threading.Lock()
        self._arrival = threading.local()
        self.nodes: list[Lifetime] = []
        self.tpu_pods: list[Lifetime] = []
        self.attempts: list[Attempt] = []
        self.checkpoints: list[Checkpoint] = []

    @contextlib.contextmanager
    def nodes_arriving_at(self, at: float) -> Iterator[None]:
        """Nodes created in this thread in the block came at `at` (simulated): a slice's hosts
        come together, however long the emulator takes to store them one by one."""
        self._arrival.at = at
        try:
            yield
        finally:
            self._arrival.at = None

    def node_created(self, node: dict[str, Any]) -> None:
        labels = node["metadata"].get("labels") or {}
        tpu = int(((node.get("status") or {}).get("allocatable") or {}).get(TPU, 0))
        pool = labels.get("cloud.google.com/gke-nodepool", "")
        at = getattr(self._arrival, "at", None)
        started = self.clock() if at is None else at
        with self._lock:
            self.nodes.append(Lifetime(node["metadata"]["name"], pool, tpu, started))

    def node_deleted(self, name: str) -> None:
        self._end(self.nodes, name)

    def pod_phase(self, pod: dict[str, Any], phase: str) -> None:
        """A TPU pod starts running or ends (Succeeded, Failed, removed)."""
        tpu = _tpu_request(pod.get("spec") or {})
        if not tpu:
            return
        name = pod["metadata"]["name"]
        with self._lock:
            open_ = [p for p in self.tpu_pods if p.name == name and p.ended is None]
            if phase == "Running" and not open_:
                job = (pod["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name", "")
                self.tpu_pods.append(Lifetime(name, job, tpu, self.clock()))
            elif phase != "Running":
                for p in open_:
                    p.ended = self.clock()

    def attempt(self, pod: str, run_name: str, restored_step: int | None) -> Attempt:
        record = Attempt(pod, run_name, self.clock(), restored_step)
        with self._lock:
            self.attempts.append(record)
        return record

    def step_done(self, record: Attempt, step: int) -> None:
        """The attempt logged `step` now."""
        with self._lock:
            record.steps.append(step)
            record.step_ends.append(self.clock())

    def end_attempt(self, record: Attempt, outcome: str) -> None:
        with self._lock:
            record.ended, record.outcome = self.clock(), outcome

    def checkpoint_committed(self, run_name: str, step: int, poisoned: bool) -> None:
        with self._lock:
            self.checkpoints.append(Checkpoint(run_name, step, poisoned, self.clock()))

    def checkpoint_deleted(self, run_name: str, step: int) -> None:
        with self._lock:
            for c in self.checkpoints:
                if c.run_name == run_name and c.step == step and c.deleted is None:
                    c.deleted = self.clock()

    def poisoned_steps(self, run_name: str) -> set[int]:
        """The run's checkpoint steps saved at or after its training fault: none may be exported."""
        return {c.step for c in self.checkpoints if c.run_name == run_name and c.poisoned}

    def close(self) -> None:
        """The cluster is gone: every live node ends now."""
        now = self.clock()
        with self._lock:
            for n in self.nodes:
                if n.ended is None:
                    n.ended = now

    # -- what the bench computes -------------------------------------------------------------

    def tpu_node_seconds(self, pool_prefix: str = "", until: float | None = None) -> float:
        """Seconds TPU nodes (of pools whose name starts with `pool_prefix`) existed."""
        end = self.clock() if until is None else until
        return sum(n.seconds(end) for n in self.nodes if n.tpu and n.group.startswith(pool_prefix))

    def tpu_chip_seconds(self, until: float | None = None) -> tuple[float, float]:
        """(chip-seconds TPU nodes existed, chip-seconds pods needing google.com/tpu ran):
        their ratio is the bench's tpu_node_utilization_ratio (1.0: no idle TPU node)."""
        end = self.clock() if until is None else until
        nodes = sum(n.tpu * n.seconds(end) for n in self.nodes)
        pods = sum(p.tpu * p.seconds(end) for p in self.tpu_pods)
        return nodes, pods

    def steps_recomputed(self) -> int:
        """Steps executed again by a later attempt (work lost to capacity loss)."""
        seen: set[tuple[str, int]] = set()
        again = 0
        for a in sorted(self.attempts, key=lambda a: a.started):
            for step in a.steps:
                again += (a.run_name, step) in seen
                seen.add((a.run_name, step))
        return again

    def _end(self, records: list[Lifetime], name: str) -> None:
        with self._lock:
            for r in records:
                if r.name == name and r.ended is None:
                    r.ended = self.clock()


def _tpu_request(spec: dict[str, Any]) -> int:
    total = 0
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        total += int({**(res.get("limits") or {}), **(res.get("requests") or {})}.get(TPU, 0))
    return total
