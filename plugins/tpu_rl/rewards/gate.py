"""The reward gate: export only when training raised the mean reward enough."""

from __future__ import annotations

import math
from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException


def reward_gate(rewards: dict[str, Any], min_gain: float) -> dict[str, float]:
    """Stop before export unless post mean_reward >= pre mean_reward + min_gain."""
    if not rewards or not rewards.get("post"):
        raise AirflowFailException("no post-training metrics: the reward sensor gave none")
    post = _mean_reward(rewards["post"], "post")
    pre_metrics = rewards.get("pre")
    if pre_metrics is None:
        raise AirflowFailException(
            f"post-training mean_reward={post:.4f} but no pre-training line to compare with "
            "(num_test_batches=0?)"
        )
    pre = _mean_reward(pre_metrics, "pre")
    if post < pre + min_gain:
        raise AirflowFailException(
            f"reward gate: post-training mean_reward={post:.4f} is below pre-training "
            f"mean_reward={pre:.4f} + min_reward_gain={min_gain:g}; not exporting"
        )
    return {"pre_mean_reward": pre, "post_mean_reward": post, "gain": post - pre}


def _mean_reward(metrics: Any, which: str) -> float:
    """The line's finite mean_reward, else a failure saying what the line held instead."""
    value = metrics.get("mean_reward") if isinstance(metrics, dict) else None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise AirflowFailException(
            f"reward gate: the {which}-training line has no usable mean_reward (got {value!r}; "
            "a MaxText build without reward logging, or a NaN reward); not exporting"
        )
    return number
