"""The DAG's small Python steps: validation, the reward gate, the export check."""

from __future__ import annotations

import math
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from tpu_rl.report import publish_run_report
from tpu_rl.runtime import layout_from_context
from tpu_rl.settings import SettingsError, load_settings
from tpu_rl.storage import missing_export_files


def validate_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The run's settings, checked; every problem in one failure, before any cloud call."""
    try:
        return load_settings(dict(params)).to_dict()
    except SettingsError as err:
        raise AirflowFailException(str(err)) from err


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


def verify_export(context: Any) -> str:
    """The exported model's URI, after checking its files exist and writing the run report.

    Airflow 3.3's Task SDK cannot set the run's note, so the report's summary goes to the log.
    """
    layout = layout_from_context(context)
    missing = missing_export_files(layout.export_dir, layout.settings.gcp_conn_id)
    if missing:
        raise AirflowFailException(f"export {layout.export_dir} lacks {', '.join(missing)}")
    publish_run_report(layout, context)
    return layout.export_dir
