"""Every task's time limit, from the run's settings: applied at run time, checked against the
DAG's dagrun_timeout before any cloud call.

`execution_timeout` is fixed when the DAG file is parsed (from the defaults); `apply_run_limits`,
which every task runs before execute (`RunLimited`), replaces it with the run's value and caps
it at the run's work deadline (run start + dagrun_timeout - the cleanup reserve), so work stops
in time for the teardowns: the scheduler's dagrun_timeout skips teardowns that have not finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tpu_rl.setting_fields import DEFAULTS

if TYPE_CHECKING:
    from airflow.sdk import DAG

    from tpu_rl.settings import RunSettings

STEP_MINUTES = 10  # the short steps (checks, bucket, Secret, submissions); no setting of their own
DEADLINE_ATTR = "tpu_rl_deadline"  # epoch seconds this try of the task must end by


class Limit:
    """One task's limit per try, the tries it gets, and the settings the limit comes from.

    `total`: the limit holds for all tries together (a deadline fixed at the first start).
    A plain class: a NamedTuple or frozen dataclass costs about 1 ms of every parse to define.
    """

    __slots__ = ("minutes", "settings", "total", "tries")

    def __init__(
        self,
        minutes: Callable[[RunSettings], float],
        tries: int,
        settings: tuple[str, ...] = (),
        total: bool = False,
    ) -> None:
        self.minutes, self.tries, self.settings, self.total = minutes, tries, settings, total

    @property
    def retries(self) -> int:
        return self.tries - 1

    @property
    def counted_tries(self) -> int:
        """How many times the limit can pass in the worst case."""
        return 1 if self.total else self.tries


def _step(s: RunSettings) -> float:
    return STEP_MINUTES


def _pending_plus(name: str) -> Callable[[RunSettings], float]:
    return lambda s: s.pending_timeout_minutes + getattr(s, name)


# The work, in the order it runs (one path: the sum is the worst case).
WORK: dict[str, Limit] = {
    "validate": Limit(_step, 1),
    "ensure_bucket": Limit(_step, 2),
    "create_cluster": Limit(lambda s: s.cluster_timeout_minutes, 2, ("cluster_timeout_minutes",)),
    "hf_token_secret": Limit(_step, 2),
    "convert": Limit(
        _pending_plus("conversion_timeout_minutes"),
        2,
        ("pending_timeout_minutes", "conversion_timeout_minutes"),
    ),
    "start_backend": Limit(
        lambda s: s.pending_timeout_minutes + STEP_MINUTES, 2, ("pending_timeout_minutes",)
    ),
    "train": Limit(
        lambda s: s.pending_timeout_minutes + STEP_MINUTES, 2, ("pending_timeout_minutes",)
    ),
    # a total from the first start, whatever the deferrals and retries (a retry survives a
    # worker lost with the scheduler before the wait deferred)
    "wait_for_rewards": Limit(
        lambda s: s.training_timeout_minutes, 2, ("training_timeout_minutes",), total=True
    ),
    "gate": Limit(_step, 1),
    "export": Limit(
        _pending_plus("export_timeout_minutes"),
        2,
        ("pending_timeout_minutes", "export_timeout_minutes"),
    ),
    "verify": Limit(_step, 2),
}
# Beside the path (runs while the gate and export do): not part of the sum.
SIDE: dict[str, Limit] = {"stop_backend": Limit(_step, 2)}
# The teardowns, in order: their worst case is the reserve the work must leave them.
CLEANUP: dict[str, Limit] = {
    "cleanup_kubernetes": Limit(_step, 4),
    "cleanup_cluster": Limit(lambda s: s.cluster_timeout_minutes, 4, ("cluster_timeout_minutes",)),
    "outcome": Limit(_step, 1),
}
LIMITS: dict[str, Limit] = {**WORK, **SIDE, **CLEANUP}


def limit_tasks(dag: DAG) -> None:
    """Gives each task of the DAG its retries and parse-time execution_timeout (the defaults'
    limit); a task missing from LIMITS fails the parse."""
    for task in dag.tasks:
        limit = LIMITS[task.task_id]
        task.retries = limit.retries
        task.execution_timeout = timedelta(minutes=limit.minutes(DEFAULTS))


def _total(limits: dict[str, Limit], s: RunSettings) -> float:
    return sum(limit.minutes(s) * limit.counted_tries for limit in limits.values())


def work_minutes(s: RunSettings) -> float:
    """The worst case of the work: every limit times its tries."""
    return _total(WORK, s)


def cleanup_reserve_minutes(s: RunSettings) -> float:
    """The worst case of the teardowns, which the work must leave before dagrun_timeout."""
    return _total(CLEANUP, s)


def budget_problem(s: RunSettings, dagrun_timeout_minutes: float) -> str | None:
    """Why the run's limits cannot fit the DAG's dagrun_timeout, naming the settings; or None."""
    work, reserve = work_minutes(s), cleanup_reserve_minutes(s)
    if work + reserve <= dagrun_timeout_minutes:
        return None
    terms = [
        f"{task_id} {limit.minutes(s):g} min x {limit.counted_tries}"
        for task_id, limit in {**WORK, **CLEANUP}.items()
        if limit.settings
    ]
    names = sorted({name for limit in LIMITS.values() for name in limit.settings})
    return (
        f"time limits: the worst case, {work:g} min of work + {reserve:g} min of cleanup "
        f"(largest: {', '.join(terms)}; each limit x its tries), exceeds the DAG's "
        f"dagrun_timeout of {dagrun_timeout_minutes:g} min (TPU_RL_DAGRUN_TIMEOUT_MINUTES, set by "
        f"the deployer): lower {', '.join(names)}, or raise TPU_RL_DAGRUN_TIMEOUT_MINUTES"
    )


def work_deadline(context: Any, s: RunSettings) -> float | None:
    """Epoch seconds the run's work must end by to leave the teardowns their reserve."""
    dag_run, timeout = context.get("dag_run"), getattr(context.get("dag"), "dagrun_timeout", None)
    started = getattr(dag_run, "start_date", None)
    if started is None or timeout is None:
        return None
    return started.timestamp() + timeout.total_seconds() - cleanup_reserve_minutes(s) * 60


def apply_run_limits(context: Any) -> None:
    """The task's limit for this try from the run's settings, capped at the
    run's work deadline; also kept as an epoch deadline for deferrals (`time_left`)."""
    from airflow.sdk.exceptions import AirflowFailException

    from tpu_rl.settings import SettingsError, load_settings

    task = context["task"]
    limit = LIMITS.get(task.task_id)
    if limit is None:
        return
    try:
        s = load_settings(dict(context["params"]))
    except SettingsError:
        return  # validate reports it; the parse-time limit stays
    seconds = limit.minutes(s) * 60
    capped = task.task_id not in CLEANUP and not _resuming(context)
    if capped and (deadline := work_deadline(context, s)) is not None:
        left = deadline - time.time()
        if left <= 0:
            raise AirflowFailException(
                "the run's time is up: what is left of dagrun_timeout is the cleanup's reserve "
                f"({cleanup_reserve_minutes(s):g} min)"
            )
        seconds = min(seconds, left)
    task.execution_timeout = timedelta(seconds=seconds)
    setattr(task, DEADLINE_ATTR, time.time() + seconds)


class RunLimited:
    """Operator mixin: the run's limits are applied before execute (and before each resume).

    A method, not a `pre_execute` callable in default_args: Airflow's serializer stores a
    callable argument's source (inspect.getsource) on every parse, for every task.
    """

    def pre_execute(self, context: Any) -> None:
        super().pre_execute(context)  # type: ignore[misc]
        apply_run_limits(context)


def _resuming(context: Any) -> bool:
    """Whether this try resumes after a deferral: its wait is over, its result must not be
    lost to the work deadline (the Task SDK keeps this only on the server's TI context)."""
    server = getattr(context.get("ti"), "_ti_context_from_server", None)
    return bool(getattr(server, "next_method", None))


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
