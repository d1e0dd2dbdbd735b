"""One bench.json entry: a measured value, its baseline from the same run, the goal."""

from __future__ import annotations

from typing import Any


def metric(
    value: float,
    baseline: float,
    *,
    unit: str,
    goal: float,
    baseline_is: str,
    details: dict[str, Any],
) -> dict[str, Any]:
    """`goal` is an upper bound for `value`; `vs_baseline` is value / baseline."""
    return {
        "value": round(value, 4),
        "unit": unit,
        "baseline": round(baseline, 4),
        "baseline_is": baseline_is,
        "vs_baseline": round(value / baseline, 4) if baseline else None,
        "goal": f"<= {goal:g}",
        "goal_met": value <= goal,
        "details": details,
    }
