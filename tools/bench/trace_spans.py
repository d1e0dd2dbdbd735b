"""The capacity-trace bench's arithmetic (tools/bench/capacity_trace.py) on the sandbox
ledger's step times: when training steps ran, which TPU node time they did not cover, and what
a naive product would have lost. Intervals are (start, end) simulated seconds."""

from __future__ import annotations

import math
from collections.abc import Iterable

from sandbox.ledger import Lifetime

Span = tuple[float, float]


def merge(intervals: Iterable[Span]) -> list[Span]:
    """The union of `intervals`, as sorted disjoint spans (touching spans joined)."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def step_spans(step_ends: Iterable[float], step_s: float) -> list[Span]:
    """When training steps ran: each step the `step_s` before it was logged, merged."""
    return merge((end - step_s, end) for end in step_ends)


def overlap(start: float, end: float, spans: list[Span]) -> float:
    """Seconds of [start, end] inside the disjoint `spans`."""
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in spans)


def idle_node_seconds(
    nodes: list[Lifetime], training: list[Span], until: float, within: Span | None = None
) -> float:
    """TPU node-seconds (one node is one host) in which no training step ran: each TPU node's
    lifetime (alive at `until`: up to it; cut to `within` if given) less its overlap with
    `training`."""
    low, high = within or (-math.inf, math.inf)
    idle = 0.0
    for node in nodes:
        if node.tpu:
            start = max(node.started, low)
            end = min(node.ended if node.ended is not None else until, high)
            idle += max(0.0, end - start - overlap(start, end, training))
    return idle


def hosts(nodes: list[Lifetime], until: float) -> int:
    """The most TPU nodes alive at once (a slice's hosts)."""
    edges = sorted(
        e
        for n in nodes
        if n.tpu
        for e in ((n.started, 1), (n.ended if n.ended is not None else until, -1))
    )
    alive = most = 0
    for _, delta in edges:  # an end sorts before a start at the same time
        alive += delta
        most = max(most, alive)
    return most


def static_pool_idle_seconds(
    host_count: int, start: float, until: float, training: list[Span]
) -> float:
    """Node-seconds without training of a static pool of `host_count` nodes from `start` to
    `until` (a reservation's pool, deploy to destroy)."""
    return host_count * max(0.0, until - start - overlap(start, until, training))


def first_step_start(step_ends: Iterable[float], step_s: float) -> float | None:
    """When the run's first training step began (None: no step ran)."""
    ends = list(step_ends)
    return min(ends) - step_s if ends else None


def naive_steps_lost(
    first_step: float, step_s: float, capacity_end: float, checkpoint_period: int
) -> int:
    """Steps a product that trains until its nodes go (no stop at a save) computes and loses:
    the steps that finish before `capacity_end` past the last save among them."""
    done = max(0, math.floor((capacity_end - first_step) / step_s))
    return done % checkpoint_period


def capacity_events(rung_outcomes: Iterable[str], attempt_outcomes: Iterable[str]) -> int:
    """Capacity lost or refused: rungs left (not `ready`) and training attempts that ended for
    lack of capacity (preempted, or stopped at a save before the capacity's end)."""
    rungs = sum(o != "ready" for o in rung_outcomes)
    return rungs + sum(o in ("capacity_lost", "stopped_at_save") for o in attempt_outcomes)
