"""tpu_rl.operators.cluster_objects: the run's token Secret holds the stripped token, and none
is made of a refused one."""

from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tests.support.hf_connection import TOKEN, use_password
from tpu_rl.layout import RunLayout
from tpu_rl.operators.cluster_objects import CleanupKubernetesOperator, CreateTokenSecretOperator
from tpu_rl.settings.run_settings import load_settings


class RecordingCore:
    """CoreV1Api's create_namespaced_secret, recording what it was given."""

    def __init__(self) -> None:
        self.secrets: list[dict] = []

    def create_namespaced_secret(self, namespace: str, body: dict) -> None:
        self.secrets.append(body)


def token_secret_step(monkeypatch, tutorial_conf) -> tuple[CreateTokenSecretOperator, list]:
    step = CreateTokenSecretOperator(task_id="hf_token_secret")
    core = RecordingCore()
    layout = RunLayout(load_settings(tutorial_conf), "manual__t", "dep")
    monkeypatch.setattr(CreateTokenSecretOperator, "core", core)
    monkeypatch.setattr(step, "run_layout", lambda context: layout)
    return step, core.secrets


def test_the_runs_secret_holds_the_stripped_token(monkeypatch, tutorial_conf):
    """The Secret feeds HF_TOKEN to the conversion and export Jobs (hf_access_token=...)."""
    use_password(monkeypatch, f"{TOKEN}\r\n")
    step, secrets = token_secret_step(monkeypatch, tutorial_conf)
    step.execute(SimpleNamespace())
    (secret,) = secrets
    assert base64.b64decode(secret["data"]["token"]).decode() == TOKEN


def test_no_secret_is_made_of_a_refused_token(monkeypatch, tutorial_conf):
    use_password(monkeypatch, "hf_SECRET\ntoken123")
    step, secrets = token_secret_step(monkeypatch, tutorial_conf)
    with pytest.raises(AirflowFailException, match="holds whitespace") as refused:
        step.execute(SimpleNamespace())
    assert secrets == [] and "SECRET" not in str(refused.value)


def cleanup_step(monkeypatch, layout_or_error: object, swept: tuple) -> CleanupKubernetesOperator:
    """cleanup_kubernetes on a run whose layout is `layout_or_error` (raised if an exception),
    its sweep answering `swept` (removed, errors)."""
    step = CleanupKubernetesOperator()

    def run_layout(context: object) -> object:
        if isinstance(layout_or_error, Exception):
            raise layout_or_error
        return layout_or_error

    monkeypatch.setattr(step, "run_layout", run_layout)
    monkeypatch.setattr(step, "remove_run_objects", lambda layout: swept)
    return step


def test_cleanup_returns_what_it_removed(monkeypatch):
    removed = {"jobsets": ["rl-1-backend"], "jobs": []}
    assert cleanup_step(monkeypatch, object(), (removed, [])).execute({}) == removed


def test_cleanup_that_could_not_remove_everything_fails_to_be_retried(monkeypatch):
    from airflow.providers.common.compat.sdk import AirflowException

    step = cleanup_step(monkeypatch, object(), ({}, ["jobs: 503", "secrets: 500"]))
    with pytest.raises(AirflowException, match=r"retrying is safe\): jobs: 503; secrets: 500"):
        step.execute({})


def test_cleanup_of_a_run_with_invalid_settings_is_skipped(monkeypatch):
    from airflow.providers.common.compat.sdk import AirflowSkipException

    from tpu_rl.settings.run_settings import SettingsError

    step = cleanup_step(monkeypatch, SettingsError(["num_batches: bad"]), ({}, []))
    with pytest.raises(AirflowSkipException, match="nothing was created"):
        step.execute({})
