"""The run's time budget: limits x tries plus the cleanup reserve must fit dagrun_timeout."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from tpu_rl.dag import run_limits, steps
from tpu_rl.dag.run_checks import check_run
from tpu_rl.settings.run_settings import load_settings

DAY = 24 * 60


def _dag(timeout_minutes: float) -> SimpleNamespace:
    """What check_run reads of the DAG: its dagrun_timeout and its steps' limits."""
    tasks = [SimpleNamespace(task_id=task_id, limit=lim) for task_id, lim in steps.LIMITS.items()]
    return SimpleNamespace(dagrun_timeout=timedelta(minutes=timeout_minutes), tasks=tasks)


def test_the_defaults_fit_the_default_timeout(tutorial_conf):
    s = load_settings(tutorial_conf)
    assert run_limits.budget_problem(s, 3 * DAY, steps.LIMITS) is None
    # each limit x its tries: e.g. the conversion (pending + conversion) twice
    assert run_limits.work_minutes(s, steps.LIMITS) == pytest.approx(2220)
    reserve = run_limits.cleanup_reserve_minutes(s, steps.LIMITS)
    assert reserve == pytest.approx(4 * 10 + 4 * 90 + 10)


def test_a_combination_that_cannot_fit_is_named(tutorial_conf):
    s = load_settings({**tutorial_conf, "training_timeout_minutes": 3000})
    problem = run_limits.budget_problem(s, 3 * DAY, steps.LIMITS)
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


def test_validate_rejects_it_before_any_cloud_call(tutorial_conf, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT", json.dumps({"conn_type": "http", "password": "hf_x1"})
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"})
    )
    assert check_run(load_settings(tutorial_conf), _dag(3 * DAY))["cluster_name"] == "gemma4-rl"
    with pytest.raises(AirflowFailException, match="training_timeout_minutes"):
        check_run(load_settings(tutorial_conf), _dag(20 * 60))


def test_validate_names_a_database_connection_as_the_token_source(tutorial_conf, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT",
        json.dumps({"conn_type": "postgres", "password": "db-secret"}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"})
    )
    with pytest.raises(AirflowFailException, match="'huggingface_default' has type 'postgres'"):
        check_run(load_settings(tutorial_conf), _dag(3 * DAY))


def test_every_task_of_the_dag_has_a_limit_and_tries():
    assert all(limit.tries >= 1 for limit in steps.LIMITS.values())
    assert steps.LIMITS["cleanup_cluster"].retries == 3


def test_the_wait_may_retry_but_its_total_limit_counts_once(tutorial_conf):
    """A retry survives a worker lost before the wait deferred; the deadline stays the first's."""
    wait = steps.LIMITS["wait_for_rewards"]
    assert wait.retries == 1 and wait.counted_tries == 1
    problem = run_limits.budget_problem(
        load_settings({**tutorial_conf, "training_timeout_minutes": 3000}), 3 * DAY, steps.LIMITS
    )
    assert "wait_for_rewards 3000 min x 1" in problem
