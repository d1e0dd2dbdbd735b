"""tpu_rl.dag.run_checks: validate refuses, before any cloud call, limits that cannot fit the
DAG's timeout and deployment settings `promote` would refuse."""

from __future__ import annotations

import json

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tests.support.run_dag import DAY, run_dag
from tests.support.vertex_settings import BAD, IDS, IMAGE
from tpu_rl.dag.run_checks import check_run
from tpu_rl.settings.run_settings import load_settings


def test_validate_rejects_it_before_any_cloud_call(tutorial_conf, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT", json.dumps({"conn_type": "http", "password": "hf_x1"})
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"})
    )
    assert check_run(load_settings(tutorial_conf), run_dag(3 * DAY))["cluster_name"] == "gemma4-rl"
    with pytest.raises(AirflowFailException, match="training_timeout_minutes"):
        check_run(load_settings(tutorial_conf), run_dag(20 * 60))


def test_validate_names_a_database_connection_as_the_token_source(tutorial_conf, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT",
        json.dumps({"conn_type": "postgres", "password": "db-secret"}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"})
    )
    with pytest.raises(AirflowFailException, match="'huggingface_default' has type 'postgres'"):
        check_run(load_settings(tutorial_conf), run_dag(3 * DAY))


DAG = run_dag(3 * DAY)


@pytest.fixture
def connections(monkeypatch):
    for name in ("TPU_RL_VERTEX_REGISTRY", "TPU_RL_VERTEX_SERVING_IMAGE", "TPU_RL_VERTEX_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT", json.dumps({"conn_type": "http", "password": "hf_x1"})
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"})
    )


@pytest.mark.parametrize(("env", "problem"), BAD, ids=IDS)
def test_validate_refuses_a_promotion_setting_promote_would_refuse(
    tutorial_conf, connections, monkeypatch, env, problem
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(AirflowFailException) as failed:
        check_run(load_settings(tutorial_conf), DAG)
    assert problem in str(failed.value)


def test_well_formed_or_unset_settings_pass_both(tutorial_conf, connections, monkeypatch):
    from tpu_rl.preflight.vertex import check_registry_settings

    settings = load_settings(tutorial_conf)
    assert check_run(settings, DAG)["region"] == "us-east5"
    assert check_registry_settings(settings).line() == (
        "PASS vertex registry: not set: a promotion writes the champion record only"
    )
    monkeypatch.setenv("TPU_RL_VERTEX_REGISTRY", "gemma-rl")
    monkeypatch.setenv("TPU_RL_VERTEX_SERVING_IMAGE", IMAGE)
    check_run(settings, DAG)
    assert check_registry_settings(settings).line() == (
        f"PASS vertex registry: model gemma-rl in us-east5, serving image {IMAGE}"
    )
