"""The run's time budget as the DAG's tasks give it, without parsing the DAG: each step's
limit with the retries and retry delay the scheduler reads from its task."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from tests import run_steps
from tpu_rl.dag import run_limits

AIRFLOW_RETRY_DELAY = timedelta(seconds=300)  # [core] default_task_retry_delay's default


def step_tasks(retry_delay: timedelta = AIRFLOW_RETRY_DELAY, **task: object) -> list:
    """What the budget reads of each step's task: its limit, its retries (from the limit, as
    RunStep sets them) and its retry delay and backoff (Airflow's defaults unless given)."""
    return [
        SimpleNamespace(
            **{
                "task_id": task_id,
                "limit": lim,
                "retries": lim.retries,
                "retry_delay": retry_delay,
                "retry_exponential_backoff": 0,
                "max_retry_delay": None,
                **task,
            }
        )
        for task_id, lim in run_steps.LIMITS.items()
    ]


def step_budgets(
    retry_delay: timedelta = AIRFLOW_RETRY_DELAY, **task: object
) -> dict[str, run_limits.StepBudget]:
    """Each step's worst case by task id, as dag_limits gives it for the DAG's tasks."""
    return run_limits.dag_limits(step_tasks(retry_delay, **task))
