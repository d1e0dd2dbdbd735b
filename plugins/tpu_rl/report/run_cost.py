"""A run's TPU cost, counted once: by `outcome`, the DAG's last task, after every cleanup.

`outcome` counts it (tpu_rl.report.billing: the TPU nodes the run's steps saw, or its task times
when no step saw them) to the moment the run's TPUs were released: cleanup_cluster's end (the
cluster the run made destroyed, the backend deleted before it), which cleanup_cluster marks
(XCom `tpus_released_at`). So what runs after it (a person's approval, promote) costs no TPU
time, and the approval request, which counts the same way, shows the same figure. Without the
mark (cleanup_cluster failed or did not run: the TPUs may still bill) the count ends when it is
made. `outcome` keeps it in its XCom `tpu_cost`; the run report, the run's note and the RL page
all show that one figure, in chip-hours and host-hours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tpu_rl.names import Step
from tpu_rl.report.billing import CREATED_POOL, EXISTING_STATIC_POOL, TPU_NODES, tpu_billing
from tpu_rl.report.tpu_nodes import XCOM_KEY, Look, merged

if TYPE_CHECKING:
    from tpu_rl.layout import RunLayout

COST_TASK = Step.OUTCOME
COST_KEY = "tpu_cost"
RELEASED_TASK, RELEASED_KEY = Step.CLEANUP_CLUSTER, "tpus_released_at"
UNTIL_TEXT = (
    "cleanup_cluster's end (every cleanup done, the run's TPUs released; what runs after it, "
    "a person's approval included, costs no TPU time)"
)
UNTIL_NOW_TEXT = "the count's time (cleanup_cluster did not finish: the TPUs may still bill)"
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


def finished_step_durations(ti: Any, order: Sequence[str]) -> dict[str, float] | None:
    """Seconds per finished step of this task's run, in the DAG's `order` (its task ids); None
    when this Airflow cannot tell."""
    if not reads_step_durations(ti):
        return None
    return step_durations(ti.get_task_breadcrumbs(ti.dag_id, ti.run_id), order)


def step_durations(
    breadcrumbs: Iterable[Mapping[str, Any]], order: Sequence[str]
) -> dict[str, float]:
    """Seconds per finished step from Airflow's task breadcrumbs (task_id, duration, ...), in
    the DAG's `order`, steps it does not name last: Airflow sends them sorted by task id
    (airflow/api_fastapi/execution_api/routes/task_instances.py, get_task_instance_breadcrumbs)."""
    durations = {
        str(b["task_id"]): float(b["duration"])
        for b in breadcrumbs
        if b.get("duration") is not None and b.get("map_index", -1) == -1
    }
    rank = {task_id: i for i, task_id in enumerate(order)}
    return dict(sorted(durations.items(), key=lambda item: rank.get(item[0], len(rank))))


def run_started_at(context: Any) -> float:
    """Epoch seconds the run started (the first task's start when the run has no start yet)."""
    # a running task's start_date is always set (airflow/sdk/types.py,
    # RuntimeTaskInstanceProtocol.start_date: AwareDatetime), the run's may not be
    started: datetime = getattr(context["dag_run"], "start_date", None) or context["ti"].start_date
    return started.timestamp()


def mark_tpus_released(ti: Any) -> None:
    """Record, from cleanup_cluster, that the run's TPUs are released now: its cost ends here."""
    ti.xcom_push(key=RELEASED_KEY, value=datetime.now(UTC).timestamp())


def tpus_released_at(ti: Any) -> float | None:
    """When cleanup_cluster released the run's TPUs (epoch seconds); None when it did not."""
    released = ti.xcom_pull(task_ids=RELEASED_TASK, key=RELEASED_KEY)
    return float(released) if isinstance(released, int | float) else None


def run_looks(ti: Any, task_ids: list[str]) -> list[Look]:
    """The TPU nodes the run's steps saw (their `tpu_nodes` XComs; None for a task without)."""
    return merged(ti.xcom_pull(task_ids=task_ids, key=XCOM_KEY) or [])


def count_tpu_cost(
    layout: RunLayout,
    durations: Mapping[str, float] | None,
    run_seconds: float,
    looks: list[Look],
    until: float,
    until_text: str = UNTIL_TEXT,
) -> dict[str, Any]:
    """The run's chip-hours, host-hours and cost from its start (`run_seconds` before `until`)
    to `until`. Without looks the pool is counted by task times; without `durations` too
    (Airflow 3.1) a pool that scales from zero is counted from the run's start, and the rule
    says so."""
    task_seconds = {
        CREATED_POOL: run_seconds,
        EXISTING_STATIC_POOL: run_seconds,
        TPU_NODES: run_seconds
        if durations is None
        else sum(durations.get(step, 0.0) for step in TPU_STEPS),
    }
    settings = layout.settings
    tpu = tpu_billing(
        settings, layout.pool_hosts, looks, (until - run_seconds, until), task_seconds, until_text
    )
    if durations is None and tpu["rule"] == TPU_NODES:
        tpu["rule_text"] += f"; from the run's start: {NO_DURATIONS}"
    return {"tpu_type": settings.tpu_type, "slices": settings.cluster_nodepool_count, **tpu}


def count_run_cost(layout: RunLayout, context: Any) -> dict[str, Any]:
    """The run's cost from its task instance's view: its steps' looks and durations, to the
    release of its TPUs (to now when cleanup_cluster did not mark it): the same figure from any
    task that counts after the release."""
    ti = context["ti"]
    now = datetime.now(UTC).timestamp()
    released = tpus_released_at(ti)
    until = now if released is None else min(released, now)
    return count_tpu_cost(
        layout,
        finished_step_durations(ti, context["dag"].task_ids),
        max(0.0, until - run_started_at(context)),
        run_looks(ti, list(context["dag"].task_ids)),
        until,
        UNTIL_NOW_TEXT if released is None else UNTIL_TEXT,
    )
