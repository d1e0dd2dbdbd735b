"""Issue 43, finding 1: a Hugging Face connection password holding whitespace or a control
character. The one rule (tpu_rl.deployment.token_of_password), applied where every reader gets
the token (deployment.hf_token): the whitespace around the token is stripped, with a warning;
any left inside, a control or a non-ASCII character refuses it; no message quotes it. So
validate, preflight, the run's Secret and the Jobs it feeds see one clean token or none."""

from __future__ import annotations

import base64
import json
import logging
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tpu_rl import deployment
from tpu_rl.layout import RunLayout
from tpu_rl.operators.cluster_objects import CreateTokenSecretOperator
from tpu_rl.settings.run_settings import load_settings

TOKEN = "hf_SECRETtoken123"


def use_password(monkeypatch: pytest.MonkeyPatch, password: str) -> None:
    """The deployment's Hugging Face connection, with this password."""
    conn = {"conn_type": "generic", "password": password}
    monkeypatch.setenv("AIRFLOW_CONN_HF_TEXT", json.dumps(conn))
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_text")


@pytest.mark.parametrize("password", [f"{TOKEN}\n", f"{TOKEN}\r\n", f"  {TOKEN}\t"])
def test_the_whitespace_around_the_token_is_stripped_with_a_warning(monkeypatch, caplog, password):
    use_password(monkeypatch, password)
    with caplog.at_level(logging.WARNING, logger="tpu_rl.deployment"):
        assert deployment.hf_token() == TOKEN
    assert "'hf_text': its password has whitespace or a line break around" in caplog.text
    assert "SECRET" not in caplog.text


@pytest.mark.parametrize(
    "password",
    [
        "hf_SECRET token123",
        "hf_SECRET\ntoken123",
        "hf_SECRET\ttoken123\n",
        "hf_SECRET\x00token123",
        "hf_SECRET\x7ftoken123",
        "hf_SECRET\u00a0token123",  # a no-break space, pasted from a web page
        "hf_SECRET\u200btoken123",  # a zero-width space
    ],
)
def test_whitespace_or_a_control_character_inside_refuses_the_token(monkeypatch, password):
    use_password(monkeypatch, password)
    with pytest.raises(deployment.DeploymentError) as refused:
        deployment.hf_token()
    message = str(refused.value)
    assert "'hf_text': its password holds whitespace, a control character or a non-ASCII" in (
        message
    )
    assert "(character 10 of 18)" in message and "SECRET" not in message


def test_a_password_of_whitespace_only_is_no_password(monkeypatch):
    use_password(monkeypatch, " \r\n")
    with pytest.raises(deployment.DeploymentError, match="'hf_text' has no password"):
        deployment.hf_token()


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
