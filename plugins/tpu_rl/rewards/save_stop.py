"""Stopping training right after the last save that can finish before its capacity ends: the
judgment of each finished save, on the follower's state and the backend's nodes (the stop for
the spend limit is the watch's: tpu_rl.watch.core)."""

from __future__ import annotations

from typing import Any

from tpu_rl.kube.async_client import AsyncKube
from tpu_rl.rewards.capacity_loss import nodes_if_allowed
from tpu_rl.rewards.held_log import Log
from tpu_rl.watch import capacity_end
from tpu_rl.watch.ends import Result, WaitEnd, error_event
from tpu_rl.watch.state import FollowState


async def judge_save(
    api: AsyncKube,
    state: FollowState,
    period: int,
    total_steps: int | None,
    backend_pods: list[dict[str, Any]],
    known_end: float | None,
    log: Log,
) -> Result | None:
    """The `capacity_ending` event when the save the log just finished is the last that can
    finish before the slice's capacity ends; None to go on. Each save is judged once.
    `total_steps`: the training's steps, from the settings (no log line carries the total)."""
    if state.saved is None or state.saved[0] == state.judged_save:
        return None
    state.judged_save = step = int(state.saved[0])
    if total_steps is not None and step >= total_steps:
        return None  # the last step's save: training ends, nothing to stop
    pace = capacity_end.measured_pace(state.step_marks, state.saved, period)
    if pace is None:
        return None
    ends_at, nodes = await slice_end(api, backend_pods, known_end, log)
    if ends_at is None or not capacity_end.must_stop(state.saved[1], pace, period, ends_at):
        return None
    line = capacity_end.stop_line(step, ends_at, nodes, pace, period)
    log.warning(line)
    return {
        **error_event(WaitEnd.CAPACITY_ENDING, line),
        "save_step": step,
        "nodes": nodes,
        "ends_at": ends_at,
        **state.attempt_facts(),
    }


async def slice_end(
    api: AsyncKube,
    backend_pods: list[dict[str, Any]],
    known: float | None,
    log: Log,
) -> tuple[float | None, list[str]]:
    """When the backend's nodes end (the earliest; `known`: an end known in advance, when
    sooner) and the nodes that end (tpu_rl.watch.capacity_end); a node whose end cannot be
    read is skipped with a warning."""
    names = {p["spec"]["nodeName"] for p in backend_pods if p["spec"].get("nodeName")}
    nodes = (await nodes_if_allowed(api) or []) if names else []
    ends = capacity_end.slice_end(nodes, names)
    for why in ends.unreadable:
        log.warning("Capacity end not known from %s: skipped", why)
    if known is not None and (ends.at is None or known < ends.at):
        return known, ends.nodes
    return ends.at, ends.nodes
