"""The run's evaluations as data: every Pre, Intermediate Eval and Post line of every training
attempt, and the one evaluation that stands for each step.

MaxText logs the same fields on each line (corr, total, accuracy, partial_accuracy,
format_accuracy, mean_reward: trainers/post_train/rl/train_rl.py `Pre RL Training` and `Post RL
Training`, hooks.py RLTrainingHooks.on_train_step_end `Intermediate Eval (step=N)`). A resumed
attempt logs `Pre RL Training` again, for the model it restored (train_rl.py syncs the restored
weights to the rollout engine before that evaluation), and evaluates again the steps past that
checkpoint, which it computes again: for a step, the latest attempt's evaluation is the one of
the weights that attempt's checkpoint of that step holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tpu_rl.settings.choices import EVAL_METRICS


def gate_thresholds(
    gate_metrics: Mapping[str, float] | None, min_reward_gain: float
) -> dict[str, Any]:
    """What the gate requires: metric -> minimum gain (negative: the largest loss allowed);
    `gate_metrics` when set, else mean_reward by `min_reward_gain` (the rule before it)."""
    return dict(gate_metrics) if gate_metrics else {"mean_reward": min_reward_gain}


LINE_FIELDS = ("kind", "attempt", "step", "time")  # where a line comes from, not what it scored


def attempt_lines(
    attempt: int, resumed_from: int | None, event: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The evaluation lines one attempt logged, as the wait's event reports them: its Pre line
    (the step it started from: 0, or the checkpoint it restored), each Intermediate Eval, its
    Post line; each with `kind` and `attempt`."""
    lines = []
    if isinstance(event.get("pre"), dict):
        lines.append({"kind": "pre", "attempt": attempt, **event["pre"], "step": resumed_from or 0})
    for line in event.get("intermediate") or []:
        lines.append({"kind": "intermediate", "attempt": attempt, **line})
    if isinstance(event.get("post"), dict):
        lines.append({"kind": "post", "attempt": attempt, "step": None, **event["post"]})
    return lines


def by_step(evaluations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Intermediate Eval of each step, the latest attempt's (see the module's docstring),
    ascending by step."""
    latest: dict[int, dict[str, Any]] = {}
    for line in evaluations:
        if line.get("kind") == "intermediate" and isinstance(line.get("step"), int):
            latest[line["step"]] = line
    return [latest[step] for step in sorted(latest)]


def metric(line: Mapping[str, Any] | None, name: str) -> float | None:
    """The line's finite value of `name`; None when absent, NaN (None in JSON) or not a number."""
    value = line.get(name) if isinstance(line, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def step_table(
    rewards: Mapping[str, Any] | None, export: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """One row per evaluated step for the report and the RL page: the base model's (step 0),
    each intermediate step's, the final model's (Post, at the export's `final_step` when
    known), with `label` and `chosen` (the exported step)."""
    rewards, export = rewards or {}, export or {}
    chosen, final = export.get("step"), export.get("final_step")
    rows: list[dict[str, Any]] = []
    if isinstance(rewards.get("pre"), dict):
        rows.append({**_metrics(rewards["pre"]), "step": 0, "label": "pre"})
    for line in rewards.get("intermediate") or []:
        if isinstance(line, dict):
            rows.append({**_metrics(line), "step": line.get("step"), "label": "intermediate"})
    if isinstance(rewards.get("post"), dict):
        rows.append({**_metrics(rewards["post"]), "step": final, "label": "post"})
    for row in rows:  # the final step's evaluation is the Post line (checkpoint_choice)
        stands = row["label"] == "post" or (row["label"] == "intermediate" and row["step"] != final)
        row["chosen"] = chosen is not None and row["step"] == chosen and stands
    return rows


def _metrics(line: Mapping[str, Any]) -> dict[str, Any]:
    return {name: metric(line, name) for name in EVAL_METRICS}


def so_far(
    first_pre: dict[str, Any] | None,
    ended: list[dict[str, Any]],
    attempts: list[dict[str, Any]],
    state: Mapping[str, Any],
) -> dict[str, Any]:
    """The rewards while training runs, for the RL page: the first Pre line and each step's
    evaluation, of the ended attempts' lines (`ended`) and of the open attempt's so far
    (`state`: its FollowState as a dict)."""
    current = attempts[-1] if attempts and attempts[-1].get("ended") is None else None
    number = current["attempt"] if current else len(attempts) + 1
    resumed = current.get("resumed_from_step") if current else None
    lines = [*ended, *attempt_lines(number, resumed, state)]
    pre = first_pre or state.get("pre")
    return {**({"pre": pre} if isinstance(pre, dict) else {}), "intermediate": by_step(lines)}
