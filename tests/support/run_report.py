"""A run's report built from fixed rewards, gate and step durations, for the report's tests."""

from __future__ import annotations

import time
from typing import Any

from tpu_rl.layout import RunLayout
from tpu_rl.report import run_cost
from tpu_rl.report import run_report as report
from tpu_rl.settings.run_settings import load_settings

REWARDS = {
    "pre": {"corr": 8, "total": 100, "accuracy": 8.0, "mean_reward": 0.0821},
    "post": {"corr": 12, "total": 100, "accuracy": 12.0, "mean_reward": 0.1234},
    "post_time": "2026-03-01T10:00:00Z",
}


GATE = {"pre_mean_reward": 0.0821, "post_mean_reward": 0.1234, "gain": 0.0413}


# seconds; the TPU steps (convert, start_backend through wait_for_rewards, export) take 2.5 h
DURATIONS = {
    "convert": 600.0,
    "validate": 1.0,
    "create_cluster": 900.0,
    "start_backend": 300.0,
    "train": 60.0,
    "wait_for_rewards": 6840.0,
    "stop_backend": 5.0,
    "gate": 1.0,
    "export": 1200.0,
}


RUN_SECONDS = 4 * 3600.0  # the run's age when verify writes the report


def layout(conf: dict[str, Any], **overrides: Any) -> RunLayout:
    return RunLayout(
        load_settings({**conf, **overrides}), "manual__2026-03-01T08:00:00+00:00", "test-deployment"
    )


def cost(run: RunLayout, durations=DURATIONS, looks=None) -> dict[str, Any]:
    """The run's cost as outcome counts it, RUN_SECONDS after the run's start."""
    return run_cost.count_tpu_cost(run, durations, RUN_SECONDS, looks or [], time.time())


def build_report(run: RunLayout, rewards, gate, step, durations, looks=None) -> dict[str, Any]:
    return report.build_report(run, rewards, gate, step, durations, cost(run, durations, looks))


def build(conf: dict[str, Any], durations: dict[str, float] = DURATIONS, **overrides: Any):
    return build_report(layout(conf, **overrides), REWARDS, GATE, 50, durations)
