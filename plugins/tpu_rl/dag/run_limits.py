"""The run's time limits at run time: applied before every task's execute, and checked against
the DAG's dagrun_timeout before any cloud call.

`apply_run_limits` replaces the parse-time execution_timeout with the run's value and caps it at
the run's work deadline (run start + dagrun_timeout - the cleanup reserve), so work stops in
time for the teardowns: the scheduler's dagrun_timeout skips teardowns that have not finished.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import CLEANUP, DEADLINE_ATTR, WORK, Limit

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from tpu_rl.settings.run_settings import RunSettings


def dag_limits(tasks: Iterable[Any]) -> dict[str, Limit]:
    """Each step's limit by task id, from the tasks of the DAG a task runs in (each step
    declares its `limit`), so the budget needs no table of the steps."""
    return {t.task_id: t.limit for t in tasks if isinstance(getattr(t, "limit", None), Limit)}


def _total(limits: Mapping[str, Limit], role: str, s: RunSettings) -> float:
    return sum(lim.minutes(s) * lim.counted_tries for lim in limits.values() if lim.role == role)


def work_minutes(s: RunSettings, limits: Mapping[str, Limit]) -> float:
    """The worst case of the work: every limit times its tries."""
    return _total(limits, WORK, s)


def cleanup_reserve_minutes(s: RunSettings, limits: Mapping[str, Limit]) -> float:
    """The worst case of the teardowns, which the work must leave before dagrun_timeout."""
    return _total(limits, CLEANUP, s)


def budget_problem(
    s: RunSettings, dagrun_timeout_minutes: float, limits: Mapping[str, Limit]
) -> str | None:
    """Why the run's limits cannot fit the DAG's dagrun_timeout, naming the settings; or None."""
    work, reserve = work_minutes(s, limits), cleanup_reserve_minutes(s, limits)
    if work + reserve <= dagrun_timeout_minutes:
        return None
    terms = [
        f"{task_id} {limit.minutes(s):g} min x {limit.counted_tries}"
        for role in (WORK, CLEANUP)
        for task_id, limit in limits.items()
        if limit.role == role and limit.settings
    ]
    names = sorted({name for limit in limits.values() for name in limit.settings})
    return (
        f"time limits: the worst case, {work:g} min of work + {reserve:g} min of cleanup "
        f"(largest: {', '.join(terms)}; each limit x its tries), exceeds the DAG's "
        f"dagrun_timeout of {dagrun_timeout_minutes:g} min (TPU_RL_DAGRUN_TIMEOUT_MINUTES, set by "
        f"the deployer): lower {', '.join(names)}, or raise TPU_RL_DAGRUN_TIMEOUT_MINUTES"
    )


def work_deadline(context: Any, s: RunSettings) -> float | None:
    """Epoch seconds the run's work must end by to leave the teardowns their reserve."""
    dag = context.get("dag")
    dag_run, timeout = context.get("dag_run"), getattr(dag, "dagrun_timeout", None)
    started = getattr(dag_run, "start_date", None)
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
