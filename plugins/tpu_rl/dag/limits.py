"""A task's time limit and tries, declared on its operator (`limit`), from the run's settings.

`execution_timeout` is fixed when the DAG file is parsed (from the defaults); before execute
every step (tpu_rl.operators.run_step.RunStep) replaces it with the run's value, capped at the
run's work deadline (tpu_rl.dag.run_limits, imported where a task runs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

STEP_MINUTES = 10  # the short steps (checks, bucket, Secret, submissions); no setting of their own
DEADLINE_ATTR = "tpu_rl_deadline"  # epoch seconds this try of the task must end by
# Where a task's limit counts: the work, in the order it runs (one path: the sum is the worst
# case); beside the path (not part of the sum); the teardowns, whose worst case is the reserve
# the work must leave them.
WORK, SIDE, CLEANUP = "work", "side", "cleanup"


class Limit(NamedTuple):
    """One task's limit per try, the tries it gets, the settings the limit comes from, and
    where it counts (`role`: WORK, SIDE or CLEANUP).

    `total`: the limit holds for all tries together (a deadline fixed at the first start).
    Defined at each parse of the DAG file: this NamedTuple class is made in 0.17 ms, a frozen
    dataclass of the same fields in 0.63 ms (its generated methods; Python 3.11, postponed
    annotations as here), for the same immutable record.
    """

    minutes: Callable[[RunSettings], float]
    tries: int
    settings: tuple[str, ...] = ()
    total: bool = False
    role: str = WORK

    @property
    def retries(self) -> int:
        return self.tries - 1

    @property
    def counted_tries(self) -> int:
        """How many times the limit can pass in the worst case."""
        return 1 if self.total else self.tries


def _step_minutes(s: RunSettings) -> float:
    return STEP_MINUTES


def short_step(tries: int, role: str = WORK) -> Limit:
    """The limit of a short step: STEP_MINUTES per try."""
    return Limit(_step_minutes, tries, role=role)


def setting_minutes(name: str, tries: int, role: str = WORK, total: bool = False) -> Limit:
    """A limit of the setting `name` (minutes)."""
    return Limit(lambda s: getattr(s, name), tries, (name,), total=total, role=role)


def pending_plus(name: str, tries: int) -> Limit:
    """The pods' pending timeout, then the setting `name` (minutes): a Job's limit."""
    return Limit(
        lambda s: s.pending_timeout_minutes + getattr(s, name),
        tries,
        ("pending_timeout_minutes", name),
    )


def pending_plus_step(tries: int) -> Limit:
    """The pods' pending timeout, then a short step: a submission's limit."""
    return Limit(
        lambda s: s.pending_timeout_minutes + STEP_MINUTES, tries, ("pending_timeout_minutes",)
    )


def _ladder_wait_minutes(s: RunSettings) -> float:
    """The capacity ladder's waits for the slice (cluster.ladder.wait_s) and the deploys of
    the rungs after the first; one rung: the pods' pending timeout."""
    minutes = float(s.pending_timeout_minutes)  # the last rung's wait
    if s.capacity_ladder:  # parsed only then: the DAG file's parse has the default, none
        from tpu_rl.cluster.ladder import rung_wait_s
        from tpu_rl.settings.rungs import LadderError, parse_ladder

        try:
            before_last = max(0, len(parse_ladder(s.capacity_ladder)) - 1)
        except LadderError:  # validate names it
            before_last = 0
        minutes += before_last * (rung_wait_s(s) / 60.0 + s.cluster_timeout_minutes)
    return minutes


LADDER_SETTINGS = ("pending_timeout_minutes", "rung_wait_seconds", "cluster_timeout_minutes")


def _rungs(s: RunSettings) -> int:
    """The capacity ladder's rungs: 1 without a ladder (or one validate refuses)."""
    if not s.capacity_ladder:  # parsed only then: the DAG file's parse has the default, none
        return 1
    from tpu_rl.settings.rungs import LadderError, parse_ladder

    try:
        return max(1, len(parse_ladder(s.capacity_ladder)))
    except LadderError:  # validate names it
        return 1


def per_rung(name: str, tries: int) -> Limit:
    """The setting `name` (minutes) for each rung of the capacity ladder, in one try: the
    deploy that climbs the ladder (tpu_rl.cluster.climb) gives every rung a whole gcluster
    deploy, and a static rung (Spot, a reservation) may use most of it before GKE answers a
    stockout: GKE waits about 35 minutes for a static pool's VMs (capacity.GKE_IGM_WAIT_MINUTES),
    after the cluster's own creation on the first rung, so two such rungs pass one 90-minute
    limit and the try would be killed before the next rung."""
    return Limit(lambda s: getattr(s, name) * _rungs(s), tries, (name, "capacity_ladder"))


def rung_waits_plus(name: str, tries: int) -> Limit:
    """The first workload to ask for the slice (tpu_rl.operators.rung_move.RungMove): the
    ladder's waits, then the setting `name` (minutes)."""
    return Limit(
        lambda s: _ladder_wait_minutes(s) + getattr(s, name), tries, (*LADDER_SETTINGS, name)
    )


def rung_waits(tries: int) -> Limit:
    """The backend's wait for its pods on each rung of the capacity ladder (RungMove), then a
    short step."""
    return Limit(lambda s: _ladder_wait_minutes(s) + STEP_MINUTES, tries, LADDER_SETTINGS)
