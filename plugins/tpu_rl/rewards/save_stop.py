"""Stopping training right after the last save that can finish before its capacity ends:
the judgment of each finished save, on the follower's state and the backend's nodes; and right
after a save committed while the projected spend passes the run's limit (spend_stop)."""

from __future__ import annotations

import logging
from typing import Any

from tpu_rl.kube.async_client import AsyncKube
from tpu_rl.rewards.capacity_loss import nodes_if_allowed
from tpu_rl.watch import capacity_end, progress
from tpu_rl.watch.ends import Result, WaitEnd, error_event
from tpu_rl.watch.state import FollowState


async def judge_save(
    api: AsyncKube,
    state: FollowState,
    period: int,
    total_steps: int | None,
    backend_pods: list[dict[str, Any]],
    known_end: float | None,
    log: logging.Logger,
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
    log: logging.Logger,
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


def spend_stop(
    state: FollowState, spend: progress.Spend, total_steps: int | None, log: logging.Logger
) -> Result | None:
    """The `spend_limit` event at a committed save when the projected spend passes
    max_spend_usd then (tpu_rl.watch.progress: the projection of the newest step line read);
    None to go on. Each save is judged once (`judged_save` in the progress state, which the
    saved position carries). The last step's save ends training anyway: never a stop."""
    figures = state.progress or {}
    if state.saved is None or figures.get("judged_save") == state.saved[0]:
        return None
    step = int(state.saved[0])
    state.progress = {**figures, "judged_save": step}
    projected = figures.get("projected_usd")
    if not progress.passes(projected, spend) or (total_steps is not None and step >= total_steps):
        return None
    line = progress.stop_line(step, figures, spend)
    log.warning(line)
    return {
        **error_event(WaitEnd.SPEND_LIMIT, line),
        "save_step": step,
        "action": spend.action,
        "progress": state.progress,
        **state.attempt_facts(),
    }
