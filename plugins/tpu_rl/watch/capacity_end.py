"""When the run's TPU capacity ends, and whether training must stop at the save just made.

A flex-start node lives at most its node pool's max run duration (7 days unless set: GKE's
"About flex-start" page, maxRunDurationSeconds) and a calendar-mode reservation's VMs are
deleted at the reservation's end (Cloud TPU "Request a future reservation in calendar mode":
"Compute Engine automatically deletes the reservation, and any TPUs that consume it, at the end
of your reservation period"). GKE's cluster autoscaler marks the node with the time it is
terminated (its labels: InstanceTerminationAnnotationKey `node.gke.io/machine-termination-datetime`,
MaxRunDurationLabelKey `cloud.google.com/gke-max-run-duration-seconds`). GKE's node annotator
copies the annotation as is from the VM's `resourceStatus.scheduling.terminationTimestamp`
(kubernetes/cloud-provider-gcp cmd/gcp-controller-manager/node_annotator_test.go,
TestAnnotateMachineTermination: even "abc" is copied), so it is read strictly: an RFC 3339
date-time (RFC 3339 section 5.6: "T" and "Z" may be lower case), else skipped with a warning.

The pace is measured from the training log's Kubernetes timestamps: Tunix's step lines
(tpu_rl.training_log.train_step: step N's is logged an update late, after checkpoint N's save began)
and Orbax's line once a step's save is committed (SAVED). No I/O here.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

TERMINATION_ANNOTATION = "node.gke.io/machine-termination-datetime"
MAX_RUN_LABEL = "cloud.google.com/gke-max-run-duration-seconds"
# A step's save committed, its directory renamed or its commit file written: Orbax logs
# `'[process=%s][thread=%s] Finished saving checkpoint (finalized tmp dir) to `%s`.'` with the
# step's final directory (google/orbax checkpoint/orbax/checkpoint/_src/path/atomicity.py:845-851,
# on_commit_callback, at 20be488a: orbax-checkpoint 0.12.2, MaxText 0.2.4's floor), after a
# synchronous save as after an asynchronous one. Tunix saves the actor at
# `<checkpoints>/actor/<step>` (tunix/rl/rl_cluster.py:577-580; step names without a prefix,
# tunix/sft/checkpoint_options.py:108) through Orbax's asynchronous path: its v1 Checkpointer
# always wraps an AsyncCheckpointer (orbax experimental/v1/_src/saving/saving.py:298-343), and
# MaxText passes no `async_checkpointing` (trainers/post_train/rl/train_rl.py:443-446), so the
# v0 default `enable_async_checkpointing=True` held before Tunix moved to v1 too. Orbax's
# `[step=N] Finished synchronous save.` (checkpoint_manager.py:1588-1593) is therefore never
# logged on this path; where it is (a synchronous save: MaxText's
# src/maxtext/examples/dpo_qwen3_demo.ipynb:2732-2736 at maxtext-v0.2.4), this line precedes it.
SAVED_MARKER = "Finished saving checkpoint (finalized tmp dir) to"
SAVED = re.compile(re.escape(SAVED_MARKER) + r" `[^`]*/(\d+)/?`")
# RFC 3339 section 5.6, date-time: full-date "T" full-time, the "T" and "Z" in either case
_DATE_TIME = re.compile(
    r"(\d{4}-\d\d-\d\d)[Tt](\d\d:\d\d:\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)", re.ASCII
)
MARKS_KEPT = 6  # step marks kept in the follower's state: enough for the newest gaps


def epoch(stamp: Any) -> float:
    """Epoch seconds of an RFC 3339 date-time; ValueError naming the value when it is not one."""
    match = _DATE_TIME.fullmatch(stamp) if isinstance(stamp, str) else None
    if match is None:
        raise ValueError(f"not an RFC 3339 date-time: {stamp!r}")
    day, time, fraction, zone = match.groups()
    offset = "+00:00" if zone in "Zz" else zone
    try:
        whole = datetime.fromisoformat(f"{day}T{time}{offset}")
    except ValueError:  # a month 13, a 25th hour
        raise ValueError(f"not an RFC 3339 date-time: {stamp!r}") from None
    return whole.timestamp() + float(f"0{fraction or ''}")


def node_end(node: dict[str, Any]) -> float | None:
    """When GKE terminates this node (epoch seconds); None when nothing says it will.
    ValueError naming the node and the value when what says so is unreadable."""
    meta = node.get("metadata") or {}
    name = meta.get("name")
    if stamp := (meta.get("annotations") or {}).get(TERMINATION_ANNOTATION):
        try:
            return epoch(stamp)
        except ValueError as error:
            raise ValueError(f"node {name}: annotation {TERMINATION_ANNOTATION}: {error}") from None
    seconds = (meta.get("labels") or {}).get(MAX_RUN_LABEL)
    created = meta.get("creationTimestamp")
    if seconds and created and seconds.isdigit():
        try:
            return epoch(created) + int(seconds)
        except ValueError as error:
            raise ValueError(f"node {name}: creationTimestamp: {error}") from None
    return None


@dataclass(frozen=True)
class SliceEnd:
    """The earliest end of a slice's nodes (None: none is known to end), the nodes known to end
    (the resume waits for them to go), and why a node's end was not read (one line each)."""

    at: float | None
    nodes: list[str]
    unreadable: list[str]


def slice_end(nodes: list[dict[str, Any]], names: set[str]) -> SliceEnd:
    """When the named nodes end: a node whose end is unreadable counts as not known to end."""
    known: dict[str, float] = {}
    unreadable = []
    for node in nodes:
        if (name := node["metadata"]["name"]) not in names:
            continue
        try:
            end = node_end(node)
        except ValueError as error:
            unreadable.append(str(error))
            continue
        if end is not None:
            known[name] = end
    return SliceEnd(min(known.values(), default=None), sorted(known), unreadable)


@dataclass(frozen=True)
class Pace:
    """Seconds per training step and per save, as the log showed them."""

    step_s: float
    save_s: float


def measured_pace(marks: list[list[float]], saved: list[float], period: int) -> Pace | None:
    """The pace from step marks `[step, at]` and the last save `[step, at]`: the save's own
    time and the longest gap between two consecutive step lines, less that save time where a
    save came between them. None before there is a gap.

    Tunix logs step N's line an update late (tpu_rl.training_log.train_step): save N starts right
    after step N-1's line (tunix/sft/peft_trainer.py:1016-1027 at c4ec573:
    `_write_train_metrics()` then `checkpoint_manager.save(self._train_steps, ...)`), so the
    save's time runs from that line to its commit line, and it lies between the lines of steps
    N-1 and N. Timestamps out of order (a step logged before the one it follows) give no gap: a
    pace measured from them would put the next save in the past."""
    step_line = next((at for step, at in marks if step == saved[0] - 1), None)
    save_s = max(0.0, saved[1] - step_line) if step_line is not None else 0.0
    gaps = [
        b_at - a_at - (save_s if b % period == 0 else 0.0)
        for (a, a_at), (b, b_at) in itertools.pairwise(marks)
        if b == a + 1 and b_at > a_at
    ]
    step_s = max(gaps, default=0.0)
    return Pace(step_s, save_s) if step_s > 0 else None


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
