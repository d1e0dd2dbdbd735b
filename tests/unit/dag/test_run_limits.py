"""The run's time budget: limits x tries plus the cleanup reserve must fit dagrun_timeout."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests import run_steps
from tests.budgets import step_budgets
from tests.support.run_dag import DAY
from tpu_rl.dag import run_limits
from tpu_rl.settings.run_settings import load_settings

BUDGETS = step_budgets()


def test_the_defaults_fit_the_default_timeout(tutorial_conf):
    s = load_settings(tutorial_conf)
    assert run_limits.budget_problem(s, 3 * DAY, BUDGETS) is None
    # each limit x its tries, plus 5 min before each retry: the conversion (pending +
    # conversion) twice with one wait, ..., preflight 3 x 10; compare_champion, approve and
    # promote 10 each (approval=none; evaluate_champion runs beside the path); evaluate_heldout
    # 10 (held-out evaluation off: it skips)
    retries = sum(lim.retries for lim in run_steps.WORK_LIMITS.values())
    assert run_limits.work_minutes(s, BUDGETS) == pytest.approx(2290 + 5 * retries)
    reserve = run_limits.cleanup_reserve_minutes(s, BUDGETS)
    assert reserve == pytest.approx(4 * 10 + 4 * 90 + 10 + 5 * (3 + 3))


def test_the_cleanup_reserve_counts_the_waits_before_retries(tutorial_conf):
    """cleanup_kubernetes (4 x 10 min), cleanup_cluster (4 x 90 min) and the outcome
    (10 min) are 410 min of tries, and the scheduler waits 5 min before each of the six
    retries: 440 min. A reserve of 410 lets dagrun_timeout skip the last destroy."""
    s = load_settings(tutorial_conf)
    assert run_limits.cleanup_reserve_minutes(s, BUDGETS) == pytest.approx(440)
    no_wait = step_budgets(timedelta(0))
    assert run_limits.cleanup_reserve_minutes(s, no_wait) == pytest.approx(410)
    # the budget leaves the teardowns their 440 min after the worst case of the work
    work = run_limits.work_minutes(s, BUDGETS)
    assert run_limits.budget_problem(s, work + 440, BUDGETS) is None
    problem = run_limits.budget_problem(s, work + 439, BUDGETS)
    assert "440 min of cleanup" in problem
    assert "cleanup_cluster 90 min x 4 + 15 min of retry waits" in problem


def test_the_retry_waits_follow_the_tasks_exponential_backoff(tutorial_conf):
    """As TaskInstance.next_retry_datetime: below 2 x delay x multiplier^(try - 1) each, capped
    at the task's max_retry_delay."""
    s = load_settings(tutorial_conf)
    grown = step_budgets(timedelta(minutes=1), retry_exponential_backoff=2.0)
    # cleanup_kubernetes: 4 x 10 min + (2 x 60 - 1) + (2 x 120 - 1) + (2 x 240 - 1) s
    assert grown["cleanup_kubernetes"].minutes(s) == pytest.approx(40 + (119 + 239 + 479) / 60)
    capped = step_budgets(
        timedelta(minutes=1), retry_exponential_backoff=2.0, max_retry_delay=timedelta(minutes=2)
    )
    assert capped["cleanup_kubernetes"].minutes(s) == pytest.approx(40 + (119 + 120 + 120) / 60)


def test_a_combination_that_cannot_fit_is_named(tutorial_conf):
    s = load_settings({**tutorial_conf, "training_timeout_minutes": 3000})
    problem = run_limits.budget_problem(s, 3 * DAY, BUDGETS)
    assert problem is not None
    for part in (
        "exceeds the DAG's dagrun_timeout of 4320 min",
        "wait_for_rewards 3000 min x 1",
        "convert 240 min x 2",
        "cleanup_cluster 90 min x 4",
        "training_timeout_minutes",
        "TPU_RL_DAGRUN_TIMEOUT_MINUTES",
    ):
        assert part in problem, (part, problem)


def test_every_task_of_the_dag_has_a_limit_and_tries():
    assert all(limit.tries >= 1 for limit in run_steps.LIMITS.values())
    assert run_steps.LIMITS["cleanup_cluster"].retries == 3


def test_the_wait_may_retry_but_its_total_limit_counts_once(tutorial_conf):
    """A retry survives a worker lost before the wait deferred; the deadline stays the first's."""
    wait = run_steps.LIMITS["wait_for_rewards"]
    assert wait.retries == 1 and wait.counted_tries == 1
    problem = run_limits.budget_problem(
        load_settings({**tutorial_conf, "training_timeout_minutes": 3000}), 3 * DAY, BUDGETS
    )
    assert "wait_for_rewards 3000 min x 1" in problem


def test_a_limit_and_a_step_budget_are_frozen_records():
    """Declared on an operator class and shared by its tasks: no task may change another's."""
    limit = run_steps.LIMITS["train"]
    budget = BUDGETS["train"]
    for record, field in ((limit, "tries"), (budget, "retry_wait_minutes")):
        with pytest.raises(AttributeError):  # a frozen dataclass's error is one
            setattr(record, field, 99)
    assert limit._replace(tries=limit.tries) == limit  # compared by value


def test_each_rung_of_a_capacity_ladder_gets_its_own_cluster_limit(tutorial_conf):
    """create_cluster deploys the ladder's rungs one after the other in one try
    (tpu_rl.cluster.climb); a static rung (Spot, a reservation) may wait GKE's ~35 minutes for
    its VMs before the stockout, the first after the cluster's own creation, so two static rungs
    would pass one 90-minute limit and the try be killed instead of moving on. The limit is
    cluster_timeout_minutes for each rung; the budget counts it so."""
    from tpu_rl.operators.cluster import CreateClusterOperator

    ladder = "reservation@us-east5-b, spot@us-east5-a, flex_start@us-east5-a"
    one = load_settings(tutorial_conf)
    three = load_settings({**tutorial_conf, "capacity_ladder": ladder})
    limit = CreateClusterOperator.limit
    assert (limit.minutes(one), limit.minutes(three)) == (90, 3 * 90)
    assert set(limit.settings) == {"cluster_timeout_minutes", "capacity_ladder"}
    grown = run_limits.work_minutes(three, BUDGETS) - run_limits.work_minutes(one, BUDGETS)
    assert grown >= 2 * 2 * 90  # two more rungs' limits, for each of create_cluster's 2 tries
