"""The deployment settings `promote` needs are refused by validate and preflight, before any spend
(issue 43 finding 4), not by promote after the training and the approval."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from tests.budgets import step_tasks
from tpu_rl.dag.run_checks import check_run
from tpu_rl.settings.run_settings import load_settings

IMAGE = "us-docker.pkg.dev/serving/vllm@sha256:" + "a" * 64
DAG = SimpleNamespace(dagrun_timeout=timedelta(days=3), tasks=step_tasks())
BAD = [
    ({"TPU_RL_VERTEX_REGISTRY": "Gemma RL"}, "TPU_RL_VERTEX_REGISTRY: 'Gemma RL' is not"),
    ({"TPU_RL_VERTEX_REGISTRY": "gemma-rl"}, "TPU_RL_VERTEX_SERVING_IMAGE: required"),
    (
        {"TPU_RL_VERTEX_REGISTRY": "gemma-rl", "TPU_RL_VERTEX_SERVING_IMAGE": "vllm/vllm:latest"},
        "TPU_RL_VERTEX_SERVING_IMAGE: 'vllm/vllm:latest' is not an image in Artifact Registry",
    ),
    (
        {
            "TPU_RL_VERTEX_REGISTRY": "gemma-rl",
            "TPU_RL_VERTEX_SERVING_IMAGE": IMAGE,
            "TPU_RL_VERTEX_REGION": "US Central",
        },
        "TPU_RL_VERTEX_REGION: 'US Central' is not a Google Cloud location name",
    ),
    (
        {
            "TPU_RL_VERTEX_REGISTRY": "gemma-rl",
            "TPU_RL_VERTEX_SERVING_IMAGE": IMAGE,
            "TPU_RL_API_ENDPOINTS": "{not json",
        },
        "TPU_RL_API_ENDPOINTS: not a JSON object",
    ),
]
IDS = ["model-id", "no-image", "image-host", "region", "endpoints"]


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


@pytest.mark.parametrize(("env", "problem"), BAD, ids=IDS)
def test_preflight_refuses_it_too_with_the_fix(tutorial_conf, monkeypatch, env, problem):
    from tpu_rl.preflight.vertex import check_registry_settings

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    line = check_registry_settings(load_settings(tutorial_conf)).line()
    assert line.startswith("FAIL vertex registry: ") and problem in line
    assert "-> fix: fix the deployment's setting" in line


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
