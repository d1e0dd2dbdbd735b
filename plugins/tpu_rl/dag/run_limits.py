"""The run's time limits at run time: applied before every task's execute, and checked against
the DAG's dagrun_timeout before any cloud call.

`apply_run_limits` replaces the parse-time execution_timeout with the run's value and caps it at
the run's work deadline (run start + dagrun_timeout - the cleanup reserve), so work stops in
time for the teardowns: the scheduler's dagrun_timeout skips teardowns that have not finished.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import CLEANUP, DEADLINE_ATTR, WORK, Limit

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from tpu_rl.settings.fields import RunSettings


@dataclass(frozen=True)
class StepBudget:
    """One task's worst case: its limit, the tries the scheduler gives it (the task's retries
    + 1) and the longest the scheduler may hold it before each retry (the task's retry_delay,
    grown by its exponential backoff). A retried try starts only after that wait, so the wait
    is part of the time the step takes."""

    limit: Limit
    tries: int
    retry_wait_minutes: float

    @property
    def role(self) -> str:
        return self.limit.role

    @property
    def counted_tries(self) -> int:
        """How many times the limit can pass: a `total` limit holds for all tries together
        (a try after its deadline ends at once), the others once per try."""
        return 1 if self.limit.total else self.tries

    def minutes(self, s: RunSettings) -> float:
        """The longest the step can take: its limit per counted try, plus the retry waits."""
        return self.limit.minutes(s) * self.counted_tries + self.retry_wait_minutes


def retry_wait_seconds(task: Any, failed_try: int) -> float:
    """The longest the scheduler waits after try `failed_try` fails before the next starts.

    Mirrors airflow/models/taskinstance.py TaskInstance.next_retry_datetime (3.3.2): without a
    backoff multiplier (0 or 1) the wait is retry_delay; with one it is min_backoff + a hash
    modulo min_backoff (so below 2 x min_backoff), min_backoff = ceil(retry_delay x
    multiplier ** (try_number - 1)), at least 1 s, capped at [core] max_task_retry_delay and
    at the task's max_retry_delay. (A RetryPolicy's override is not modelled: no step has one.)
    """
    delay: float = task.retry_delay.total_seconds()
    multiplier = float(task.retry_exponential_backoff or 0) or 1.0
    if multiplier == 1.0 or multiplier <= 0:
        return delay
    from airflow.configuration import conf

    min_backoff = max(1, math.ceil(delay * multiplier ** (failed_try - 1)))
    wait = min(2 * min_backoff - 1, conf.getint("core", "max_task_retry_delay", fallback=86400))
    cap: timedelta | None = getattr(task, "max_retry_delay", None)
    return min(wait, cap.total_seconds()) if cap else wait


def step_budget(task: Any) -> StepBudget:
    """A task's worst case from what the scheduler reads: its limit, retries and retry delay."""
    retries = int(task.retries or 0)
    waits = sum(retry_wait_seconds(task, failed) for failed in range(1, retries + 1))
    return StepBudget(task.limit, retries + 1, waits / 60)


def dag_limits(tasks: Iterable[Any]) -> dict[str, StepBudget]:
    """Each step's worst case by task id, from the tasks of the DAG a task runs in (each step
    declares its `limit`), so the budget needs no table of the steps."""
    return {
        t.task_id: step_budget(t) for t in tasks if isinstance(getattr(t, "limit", None), Limit)
    }


def _total(limits: Mapping[str, StepBudget], role: str, s: RunSettings) -> float:
    return sum(step.minutes(s) for step in limits.values() if step.role == role)


def work_minutes(s: RunSettings, limits: Mapping[str, StepBudget]) -> float:
    """The worst case of the work: every limit times its tries, plus the waits between them."""
    return _total(limits, WORK, s)


def cleanup_reserve_minutes(s: RunSettings, limits: Mapping[str, StepBudget]) -> float:
    """The worst case of the teardowns (limits x tries + retry waits), which the work must
    leave before dagrun_timeout: the scheduler skips a teardown still running or waiting for
    its retry when the timeout falls (scheduler_job_runner.py _schedule_dag_run)."""
    return _total(limits, CLEANUP, s)


def budget_problem(
    s: RunSettings, dagrun_timeout_minutes: float, limits: Mapping[str, StepBudget]
) -> str | None:
    """Why the run's limits cannot fit the DAG's dagrun_timeout, naming the settings; or None."""
    work, reserve = work_minutes(s, limits), cleanup_reserve_minutes(s, limits)
    if work + reserve <= dagrun_timeout_minutes:
        return None
    terms = [
        f"{task_id} {step.limit.minutes(s):g} min x {step.counted_tries}"
        + (f" + {step.retry_wait_minutes:g} min of retry waits" if step.retry_wait_minutes else "")
        for role in (WORK, CLEANUP)
        for task_id, step in limits.items()
        if step.role == role and step.limit.settings
    ]
    names = sorted({name for step in limits.values() for name in step.limit.settings})
    return (
        f"time limits: the worst case, {work:g} min of work + {reserve:g} min of cleanup "
        f"(largest: {', '.join(terms)}; each limit x its tries, plus the waits before "
        f"retries), exceeds the DAG's "
        f"dagrun_timeout of {dagrun_timeout_minutes:g} min (TPU_RL_DAGRUN_TIMEOUT_MINUTES, set by "
        f"the deployer): lower {', '.join(names)}, or raise TPU_RL_DAGRUN_TIMEOUT_MINUTES"
    )


def work_deadline(context: Any, s: RunSettings) -> float | None:
    """Epoch seconds the run's work must end by to leave the teardowns their reserve."""
    dag = context.get("dag")
    timeout: timedelta | None = getattr(dag, "dagrun_timeout", None)
    started: datetime | None = getattr(context.get("dag_run"), "start_date", None)
    if started is None or timeout is None:
        return None
    reserve = cleanup_reserve_minutes(s, dag_limits(dag.tasks))
    return started.timestamp() + timeout.total_seconds() - reserve * 60


def apply_run_limits(context: Any, run_settings: Callable[[], RunSettings] | None = None) -> None:
    """The task's limit for this try from the run's settings (`run_settings`: the task's, by
    default read from the Params), capped at the run's work deadline; also kept as an epoch
    deadline for deferrals (`time_left`)."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from tpu_rl.settings.run_settings import SettingsError, load_settings

    task = context["task"]
    limit = getattr(task, "limit", None)
    if not isinstance(limit, Limit):
        return
    try:
        s = run_settings() if run_settings else load_settings(dict(context["params"]))
    except SettingsError:
        return  # validate reports it; the parse-time limit stays
    seconds = limit.minutes(s) * 60
    capped = limit.role != CLEANUP and not _resuming(context)
    if capped and (deadline := work_deadline(context, s)) is not None:
        left = deadline - time.time()
        if left <= 0:
            raise AirflowFailException(
                "the run's time is up: what is left of dagrun_timeout is the cleanup's reserve "
                f"({cleanup_reserve_minutes(s, dag_limits(context['dag'].tasks)):g} min)"
            )
        seconds = min(seconds, left)
    task.execution_timeout = timedelta(seconds=seconds)
    setattr(task, DEADLINE_ATTR, time.time() + seconds)


TRY_MARK_XCOM = "try_started"  # pushed by each try of a limited work step at its start


def _resuming(context: Any) -> bool:
    """Whether this try resumes after a deferral: its wait is over, its result must not be
    lost to the work deadline.

    Told by an XCom the try pushes when it first starts: Airflow clears a task's XComs when a new
    try starts but not when a try resumes from a deferral (Execution API, `ti_run` in
    airflow/api_fastapi/execution_api/routes/task_instances.py: "However, do not clear it for
    deferral"; the same since Airflow 3.0).
    """
    ti = context["ti"]
    if ti.xcom_pull(task_ids=ti.task_id, key=TRY_MARK_XCOM) is not None:
        return True
    ti.xcom_push(key=TRY_MARK_XCOM, value=time.time())
    return False


def capped_deadline(task: Any, seconds: float) -> float:
    """Epoch seconds `seconds` from now, but no later than this try's deadline (if set)."""
    deadline = time.time() + seconds
    cap = getattr(task, DEADLINE_ATTR, None)
    return deadline if cap is None else min(deadline, cap)


def time_left(task: Any) -> timedelta | None:
    """What is left of this try's limit (for a deferral's timeout); None before the hook ran."""
    deadline = getattr(task, DEADLINE_ATTR, None)
    if deadline is None:
        return None
    return timedelta(seconds=max(1.0, deadline - time.time()))
