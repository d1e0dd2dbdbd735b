"""A run's TPU cost, counted once: by `outcome`, the DAG's last task, after every cleanup.

`outcome` counts it (tpu_rl.report.billing: the TPU nodes the run's steps saw, or its task times
when no step saw them) to its own start, when the cluster the run made is destroyed and its
backend deleted, and keeps it in its XCom `tpu_cost`. The run report, the run's note and the RL
page all show that one figure, in chip-hours and host-hours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tpu_rl.names import Step
from tpu_rl.report.billing import CREATED_POOL, EXISTING_STATIC_POOL, TPU_NODES, tpu_billing
from tpu_rl.report.tpu_nodes import XCOM_KEY, Look, merged

if TYPE_CHECKING:
    from tpu_rl.layout import RunLayout

COST_TASK = Step.OUTCOME
COST_KEY = "tpu_cost"
UNTIL_TEXT = "the run's end (outcome, after every cleanup)"
# Steps whose pods hold every host of the slice: conversion, the backend's life (start_backend
# creates it, the reward sensor deletes it the moment its wait ends), export.
TPU_STEPS = (Step.CONVERT, Step.START_BACKEND, Step.TRAIN, Step.WAIT_FOR_REWARDS, Step.EXPORT)
# Read from the task's own instance in a worker: the task SDK's RuntimeTaskInstance has
# get_task_breadcrumbs from task SDK 1.2 (Airflow 3.2; airflow/sdk/execution_time/task_runner.py),
# Airflow 3.1's has no way to read the other tasks' durations.
NO_DURATIONS = "step durations need Airflow 3.2 or later (task breadcrumbs)"


def reads_step_durations(ti: Any) -> bool:
    """Whether this Airflow lets a task read its run's step durations (task breadcrumbs)."""
    return hasattr(ti, "get_task_breadcrumbs")


def finished_step_durations(ti: Any) -> dict[str, float] | None:
    """Seconds per finished step of this task's run; None when this Airflow cannot tell."""
    if not reads_step_durations(ti):
        return None
    return step_durations(ti.get_task_breadcrumbs(ti.dag_id, ti.run_id))


def step_durations(breadcrumbs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Seconds per finished step from Airflow's task breadcrumbs (task_id, duration, ...)."""
    return {
        str(b["task_id"]): float(b["duration"])
        for b in breadcrumbs
        if b.get("duration") is not None and b.get("map_index", -1) == -1
    }


def run_age_seconds(context: Any) -> float:
    """Seconds since the run started (the first task's start when the run has no start yet)."""
    started = getattr(context["dag_run"], "start_date", None) or context["ti"].start_date
    return max(0.0, (datetime.now(UTC) - started).total_seconds())


def run_looks(ti: Any, task_ids: list[str]) -> list[Look]:
    """The TPU nodes the run's steps saw (their `tpu_nodes` XComs; None for a task without)."""
    return merged(ti.xcom_pull(task_ids=task_ids, key=XCOM_KEY) or [])


def count_tpu_cost(
    layout: RunLayout,
    durations: Mapping[str, float] | None,
    run_seconds: float,
    looks: list[Look],
    now: float,
) -> dict[str, Any]:
    """The run's chip-hours, host-hours and cost from its start (`run_seconds` before `now`) to
    `now`. Without looks the pool is counted by task times; without `durations` too (Airflow
    3.1) a pool that scales from zero is counted from the run's start, and the rule says so."""
    task_seconds = {
        CREATED_POOL: run_seconds,
        EXISTING_STATIC_POOL: run_seconds,
        TPU_NODES: run_seconds
        if durations is None
        else sum(durations.get(step, 0.0) for step in TPU_STEPS),
    }
    settings = layout.settings
    tpu = tpu_billing(
        settings, layout.pool_hosts, looks, (now - run_seconds, now), task_seconds, UNTIL_TEXT
    )
    if durations is None and tpu["rule"] == TPU_NODES:
        tpu["rule_text"] += f"; from the run's start: {NO_DURATIONS}"
    return {"tpu_type": settings.tpu_type, "slices": settings.cluster_nodepool_count, **tpu}


def count_run_cost(layout: RunLayout, context: Any) -> dict[str, Any]:
    """The run's cost from its task instance's view: its steps' looks and durations, to now."""
    ti = context["ti"]
    return count_tpu_cost(
        layout,
        finished_step_durations(ti),
        run_age_seconds(context),
        run_looks(ti, list(context["dag"].task_ids)),
        datetime.now(UTC).timestamp(),
    )
