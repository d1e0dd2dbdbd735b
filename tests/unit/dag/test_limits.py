"""tpu_rl.dag.limits: a task's limit per try from the run's settings, and its tries."""

from __future__ import annotations

from types import SimpleNamespace

from tpu_rl.dag import limits
from tpu_rl.dag.limits import CLEANUP, STEP_MINUTES, WORK


def settings(**values: object) -> SimpleNamespace:
    """The settings a limit reads: the pods' pending timeout, the cluster's, no ladder."""
    base = {
        "pending_timeout_minutes": 30,
        "cluster_timeout_minutes": 90,
        "training_timeout_minutes": 600,
        "rung_wait_seconds": 600,
        "capacity_ladder": "",
    }
    return SimpleNamespace(**(base | values))


def test_a_short_step_is_step_minutes_per_try_in_its_role():
    limit = limits.short_step(3, role=CLEANUP)
    assert limit.minutes(settings()) == STEP_MINUTES
    assert (limit.tries, limit.retries, limit.counted_tries, limit.role) == (3, 2, 3, CLEANUP)
    assert limit.settings == ()


def test_a_total_limit_counts_once_whatever_its_tries():
    limit = limits.setting_minutes("training_timeout_minutes", 4, total=True)
    assert limit.minutes(settings(training_timeout_minutes=120)) == 120
    assert limit.settings == ("training_timeout_minutes",) and limit.role == WORK
    assert (limit.retries, limit.counted_tries) == (3, 1)


def test_a_jobs_limit_adds_the_pending_timeout():
    job = limits.pending_plus("training_timeout_minutes", 1)
    assert job.minutes(settings()) == 30 + 600
    assert job.settings == ("pending_timeout_minutes", "training_timeout_minutes")
    assert limits.pending_plus_step(2).minutes(settings()) == 30 + STEP_MINUTES


def test_without_a_ladder_the_waits_are_the_pending_timeout_and_one_rung():
    s = settings()
    assert limits.rung_waits(1).minutes(s) == 30 + STEP_MINUTES
    assert limits.rung_waits_plus("training_timeout_minutes", 1).minutes(s) == 30 + 600
    assert limits.per_rung("cluster_timeout_minutes", 1).minutes(s) == 90


def test_each_rung_after_the_first_adds_its_wait_and_a_deploy():
    """rung_wait_seconds 600 is within the pending timeout: 10 minutes before each next rung."""
    s = settings(capacity_ladder="spot@us-east5-b,flex_start@us-east5-b,spot@us-east5-c")
    assert limits.per_rung("cluster_timeout_minutes", 1).minutes(s) == 3 * 90
    assert limits.rung_waits(1).minutes(s) == 30 + 2 * (10 + 90) + STEP_MINUTES
    per_rung = limits.per_rung("cluster_timeout_minutes", 1)
    assert per_rung.settings == ("cluster_timeout_minutes", "capacity_ladder")


def test_a_ladder_validate_refuses_counts_as_one_rung():
    s = settings(capacity_ladder="not a ladder")
    assert limits.per_rung("cluster_timeout_minutes", 1).minutes(s) == 90
    assert limits.rung_waits(1).minutes(s) == 30 + STEP_MINUTES
