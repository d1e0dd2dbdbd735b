"""A champion's record and metrics, and a challenger's, for the comparison's tests."""

from __future__ import annotations

RECORD = {"run_id": "scheduled__2026-11-26", "export_uri": "gs://b/m/hf-trained/rl-old/"}
CHAMPION = {"accuracy": 20.0, "format_accuracy": 90.0, "mean_reward": 0.2}
REWARD = {"mean_reward": 0.0}


def metrics(**values: float | None) -> dict[str, float | None]:
    """The champion's metrics with `values` changed: a challenger's."""
    return {**CHAMPION, **values}
