"""The capacity-trace bench's arithmetic (tools/bench/trace_spans.py) on given lifetimes and
step times."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sandbox.airflow_env import AIRFLOW_ENV
from sandbox.ledger import Lifetime
from tests.budgets import step_budgets
from tools.bench import trace_runs
from tools.bench import trace_spans as ts
from tpu_rl.dag import run_limits
from tpu_rl.deployment import DEFAULT_DAGRUN_TIMEOUT_MINUTES
from tpu_rl.settings.run_settings import load_settings


def test_steps_merge_into_training_spans():
    # steps of 100 s logged at 200, 300 (back to back) and 600 (after a 200 s gap)
    assert ts.step_spans([300.0, 200.0, 600.0], 100.0) == [(100.0, 300.0), (500.0, 600.0)]
    assert ts.merge([(0.0, 5.0), (5.0, 7.0), (9.0, 9.0)]) == [(0.0, 7.0)]
    assert ts.first_step_start([600.0, 200.0], 100.0) == 100.0
    assert ts.first_step_start([], 100.0) is None


def test_node_time_without_a_training_step():
    pool = "gke-tpu-v6e-pool"
    nodes = [
        Lifetime("n0", pool, 4, 0.0, 1000.0),
        Lifetime("n1", pool, 4, 0.0, 1000.0),
        Lifetime("n0", pool, 4, 1500.0, None),  # a new slice, alive at the end (2000)
        Lifetime("cpu", "cpu-np", 0, 0.0, None),  # no TPU: not billed here
    ]
    training = [(100.0, 300.0), (500.0, 600.0), (1600.0, 1700.0)]
    # n0, n1: 1000 s each, 300 s of it training; the new n0: 500 s, 100 s training
    assert ts.idle_node_seconds(nodes, training, until=2000.0) == 700 + 700 + 400
    # before the first step: n0 and n1 from 0 to 100
    assert ts.idle_node_seconds(nodes, training, 2000.0, within=(0.0, 100.0)) == 200
    # after the last step: the new n0 from 1700 to 2000
    assert ts.idle_node_seconds(nodes, training, 2000.0, within=(1700.0, 2000.0)) == 300
    assert ts.hosts(nodes, until=2000.0) == 2
    # a static pool of 2 hosts from 0 to 2000 trains 400 s of it
    assert ts.static_pool_idle_seconds(2, 0.0, 2000.0, training) == 2 * 1600


def test_a_slice_replaced_at_the_same_instant_is_not_counted_twice():
    nodes = [Lifetime("a", "p", 4, 0.0, 100.0), Lifetime("b", "p", 4, 100.0, 200.0)]
    assert ts.hosts(nodes, until=200.0) == 1


def test_naive_loss_is_the_steps_past_the_last_save_before_the_end():
    # first step at 200, 3000 s steps, the nodes end at 32000: 10 steps finish (to 30200),
    # saves every 4: steps 9 and 10 are lost
    assert ts.naive_steps_lost(200.0, 3000.0, 32000.0, 4) == 2
    assert ts.naive_steps_lost(200.0, 3000.0, 24300.0, 4) == 0  # ends right after step 8


def test_capacity_events_count_rungs_left_and_attempts_ended_for_capacity():
    assert ts.capacity_events(["no_slice", "ready"], ["completed"]) == 1
    assert ts.capacity_events([], ["stopped_at_save", "completed"]) == 1
    assert ts.capacity_events(["stockout", "no_slice", "ready"], ["capacity_lost", "error"]) == 3


# the sandbox's retry delay; the bench's runs keep the deployment's default dagrun_timeout
SANDBOX_RETRY_DELAY = timedelta(seconds=int(AIRFLOW_ENV["AIRFLOW__CORE__DEFAULT_TASK_RETRY_DELAY"]))


@pytest.mark.parametrize("job", sorted(trace_runs.CONF))
def test_each_trace_run_passes_validate(job):
    """validate refuses a run whose time limits exceed the DAG's dagrun_timeout: a bench run
    refused there ends failed with no training step and its figure is lost (the calendar run's
    long training limit needed its cluster limit lowered, as the e2e calendar test does)."""
    s = load_settings({**trace_runs.CONF[job]})
    budgets = step_budgets(SANDBOX_RETRY_DELAY)
    assert run_limits.budget_problem(s, DEFAULT_DAGRUN_TIMEOUT_MINUTES, budgets) is None
