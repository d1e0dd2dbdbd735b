"""When the run's TPU capacity ends, and whether training must stop at the save just made.

A flex-start node lives at most its node pool's max run duration (7 days unless set: GKE's
"About flex-start" page, maxRunDurationSeconds) and a calendar-mode reservation's VMs are
deleted at the reservation's end (Cloud TPU "Request a future reservation in calendar mode":
"Compute Engine automatically deletes the reservation, and any TPUs that consume it, at the end
of your reservation period"). GKE's cluster autoscaler marks the node with the time it is
terminated (its labels: InstanceTerminationAnnotationKey `node.gke.io/machine-termination-datetime`,
MaxRunDurationLabelKey `cloud.google.com/gke-max-run-duration-seconds`).

The pace is measured from the training log's Kubernetes timestamps: the trainer's step lines and
Orbax's line after a synchronous save has finalized, commit file included (orbax
checkpoint/orbax/checkpoint/checkpoint_manager.py, CheckpointManager.save: `self._finalize(...)`
then `'[process=%s][thread=%s][step=%s] Finished synchronous save.'`). No I/O here.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

TERMINATION_ANNOTATION = "node.gke.io/machine-termination-datetime"
MAX_RUN_LABEL = "cloud.google.com/gke-max-run-duration-seconds"
SAVED = re.compile(r"\[step=(\d+)\] Finished synchronous save")
MARKS_KEPT = 6  # step marks kept in the follower's state: enough for the newest gaps
REASON = "capacity_ending"  # the reward trigger's event when training stops at a save


def epoch(stamp: str) -> float:
    """Epoch seconds of an RFC3339 timestamp."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def node_end(node: dict[str, Any]) -> float | None:
    """When GKE terminates this node (epoch seconds); None when nothing says it will."""
    meta = node.get("metadata") or {}
    if stamp := (meta.get("annotations") or {}).get(TERMINATION_ANNOTATION):
        return epoch(stamp)
    seconds = (meta.get("labels") or {}).get(MAX_RUN_LABEL)
    created = meta.get("creationTimestamp")
    if seconds and created and seconds.isdigit():
        return epoch(created) + int(seconds)
    return None


def slice_end(nodes: list[dict[str, Any]], names: set[str]) -> tuple[float | None, list[str]]:
    """The earliest end of the named nodes, and the nodes that end then or are otherwise
    known to end (the resume waits for them to go)."""
    ends = {n["metadata"]["name"]: node_end(n) for n in nodes if n["metadata"]["name"] in names}
    known = {name: end for name, end in ends.items() if end is not None}
    if not known:
        return None, []
    return min(known.values()), sorted(known)


@dataclass(frozen=True)
class Pace:
    """Seconds per training step and per save, as the log showed them."""

    step_s: float
    save_s: float


def measured_pace(marks: list[list[float]], saved: list[float], period: int) -> Pace | None:
    """The pace from step marks `[step, at]` and the last save `[step, at]`: the save's own
    time (its step line to its finished line) and the longest gap between two consecutive
    steps, less that save time where a save came between them. None before there is a gap."""
    step_line = next((at for step, at in marks if step == saved[0]), None)
    save_s = max(0.0, saved[1] - step_line) if step_line is not None else 0.0
    gaps = [
        b_at - a_at - (save_s if a % period == 0 else 0.0)
        for (a, a_at), (b, b_at) in itertools.pairwise(marks)
        if b == a + 1
    ]
    return Pace(max(gaps), save_s) if gaps else None


def next_save_done(saved_at: float, pace: Pace, period: int) -> float:
    """When the next save would be finished: `period` more steps, then the save."""
    return saved_at + period * pace.step_s + pace.save_s


def must_stop(saved_at: float, pace: Pace, period: int, ends_at: float) -> bool:
    """The next save cannot finish one step's time before the capacity ends: stop now, right
    after this save, rather than compute steps that would be lost."""
    return next_save_done(saved_at, pace, period) + pace.step_s > ends_at


def stop_line(step: int, ends_at: float, nodes: list[str], pace: Pace, period: int) -> str:
    """The task log's line for a stop at a save before the capacity ends."""
    end = datetime.fromtimestamp(ends_at, UTC).isoformat(timespec="seconds")
    return (
        f"Capacity ends at {end} (nodes {', '.join(nodes) or 'of the slice'}); the save of step "
        f"{step} is the last that can finish before then (a step takes {pace.step_s:.0f}s, a "
        f"save {pace.save_s:.0f}s, a save comes every {period} steps): training stops here, the "
        "TPUs are released, and it resumes from step "
        f"{step} on new capacity"
    )
