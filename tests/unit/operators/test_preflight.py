"""tpu_rl.operators.preflight: the step fails listing each failed check with its fix, retries
only what a read may clear, and refuses a connection setting without a try."""

from __future__ import annotations

import json

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from tpu_rl.layout import RunLayout
from tpu_rl.operators.preflight import PreflightOperator
from tpu_rl.preflight import run
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.run_settings import load_settings


@pytest.fixture
def step(tutorial_conf, monkeypatch) -> PreflightOperator:
    """The step on the tutorial's run, with the deployment's connections defined."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT", json.dumps({"conn_type": "http", "password": "hf_x1"})
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"})
    )
    op = PreflightOperator()
    layout = RunLayout(load_settings(tutorial_conf), "manual__p", "dep")
    monkeypatch.setattr(op, "run_layout", lambda context: layout)
    return op


def results_of(monkeypatch, *results: CheckResult) -> None:
    monkeypatch.setattr(run, "run_preflight", lambda layout, conn, token: list(results))


def test_every_check_passed_returns_the_results(step, monkeypatch):
    results_of(monkeypatch, passed("a", "read"), CheckResult("b", False, "needs a", skipped=True))
    assert [r["name"] for r in step.execute({})] == ["a", "b"]


def test_a_failed_check_fails_the_step_without_a_retry_listing_its_fix(step, monkeypatch):
    results_of(monkeypatch, passed("a", "read"), failed("b", "missing", "make it"))
    with pytest.raises(AirflowFailException) as refused:
        step.execute({})
    assert str(refused.value) == "preflight found 1 problem(s):\nFAIL b: missing -> fix: make it"


def test_a_read_that_may_clear_is_retried(step, monkeypatch):
    transient = CheckResult("b", False, "the read failed: 503", "retry", transient=True)
    results_of(monkeypatch, transient)
    with pytest.raises(AirflowException) as retried:
        step.execute({})
    assert not isinstance(retried.value, AirflowFailException)
    assert str(retried.value).startswith("preflight could not read everything:\nFAIL b:")


def test_a_connection_of_the_wrong_type_fails_at_once(step, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_HUGGINGFACE_DEFAULT", json.dumps({"conn_type": "postgres", "password": "x"})
    )
    results_of(monkeypatch)
    with pytest.raises(AirflowFailException, match="'huggingface_default' has type 'postgres'"):
        step.execute({})
