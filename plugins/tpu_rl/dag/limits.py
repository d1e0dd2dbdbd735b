"""Every task's time limit, from the run's settings: the table, and what the DAG file's parse
needs of it.

`execution_timeout` is fixed when the DAG file is parsed (from the defaults); before execute
every task (`RunLimited`) replaces it with the run's value, capped at the run's work deadline
(tpu_rl.dag.run_limits, imported where a task runs).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tpu_rl.settings.params import default_settings

if TYPE_CHECKING:
    from airflow.sdk import DAG

    from tpu_rl.settings.run_settings import RunSettings

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
    defaults = default_settings()
    for task in dag.tasks:
        limit = LIMITS[task.task_id]
        task.retries = limit.retries
        task.execution_timeout = timedelta(minutes=limit.minutes(defaults))


class RunLimited:
    """Operator mixin: the run's limits are applied before execute (and before each resume).

    A method, not a `pre_execute` callable in default_args: Airflow's serializer stores a
    callable argument's source (inspect.getsource) on every parse, for every task.
    """

    def pre_execute(self, context: Any) -> None:
        from tpu_rl.dag.run_limits import apply_run_limits

        super().pre_execute(context)  # type: ignore[misc]
        apply_run_limits(context)
