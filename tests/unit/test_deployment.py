"""Deployment configuration: who picks the connections, their types, the token's masking, and
the deployment id the janitor keys on."""

from __future__ import annotations

import json
import re

import pytest
from airflow.sdk.log import redact as airflow_redact

from tpu_rl import deployment
from tpu_rl.token_masking import redact

_MISSING = object()


def conn(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


@pytest.mark.parametrize("conn_type", ["postgres", "mysql", "google_cloud_platform"])
def test_a_database_connection_is_no_hugging_face_token(monkeypatch, conn_type):
    conn(monkeypatch, "hf_db", conn_type=conn_type, password="db-password-123456")
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_db")
    with pytest.raises(
        deployment.DeploymentError, match=r"'hf_db' has type '.*'; the Hugging Face"
    ):
        deployment.hf_token()


def test_the_token_is_masked_with_and_without_its_prefix(monkeypatch):
    token = "hf_MaskMe0123456789abcdefZZ"
    conn(monkeypatch, "hf_rl", conn_type="http", password=token)
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_rl")
    assert deployment.hf_token() == token
    line = f"token={token} bare {token[3:]} in a pod log"
    assert token not in redact(line) and token[3:] not in redact(line)
    assert token[3:] not in airflow_redact(f"anything {token[3:]}")  # every log of the process


def test_redact_catches_a_registered_token_of_any_shape(monkeypatch):
    token = "NoPrefixToken9876543210abcdef"
    conn(monkeypatch, "hf_plain", conn_type="generic", password=token)
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_plain")
    assert token in redact(f"downloading with {token}x")  # not registered yet: no prefix to see
    deployment.hf_token()
    assert token not in redact(f"downloading with {token}")


def test_an_empty_token_is_refused(monkeypatch):
    conn(monkeypatch, "hf_empty", conn_type="http")
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_empty")
    with pytest.raises(deployment.DeploymentError, match="has no password"):
        deployment.hf_token()


def test_the_gcp_connection_must_be_a_google_one(monkeypatch):
    conn(monkeypatch, "gcp_wrong", conn_type="postgres", password="x")
    monkeypatch.setenv("TPU_RL_GCP_CONN_ID", "gcp_wrong")
    with pytest.raises(deployment.DeploymentError, match="google_cloud_platform"):
        deployment.check_gcp_connection()
    conn(monkeypatch, "gcp_right", conn_type="google_cloud_platform")
    monkeypatch.setenv("TPU_RL_GCP_CONN_ID", "gcp_right")
    assert deployment.check_gcp_connection() == "gcp_right"


def test_connection_ids_from_the_environment_or_airflow_config(monkeypatch):
    monkeypatch.delenv("TPU_RL_HF_CONN_ID", raising=False)
    assert deployment.hf_conn_id() == "huggingface_default"
    monkeypatch.setenv("AIRFLOW__TPU_RL__HF_CONN_ID", "hf_from_config")
    assert deployment.hf_conn_id() == "hf_from_config"
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_from_env")
    assert deployment.hf_conn_id() == "hf_from_env"


class StoredVariables:
    """The Task SDK's Variable API over a dict (a deployment's metadata DB)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key, default=_MISSING, deserialize_json=False):
        if key in self.values:
            return self.values[key]
        if default is _MISSING:
            raise KeyError(key)
        return default

    def set(self, key, value, description=None, serialize_json=False):
        self.values[key] = value


def test_without_configuration_each_deployment_generates_and_keeps_its_own_id(monkeypatch):
    """Never derived from a default: two installs as shipped get two identities, each stable."""
    monkeypatch.delenv("TPU_RL_DEPLOYMENT_ID", raising=False)
    monkeypatch.delenv("AIRFLOW__TPU_RL__DEPLOYMENT_ID", raising=False)
    ids = []
    for _install in range(2):
        stored = StoredVariables()
        monkeypatch.setattr("airflow.sdk.Variable", stored)
        first = deployment.deployment_id()
        assert first == deployment.deployment_id() == stored.values["tpu_rl_deployment_id"]
        ids.append(first)
    assert ids[0] != ids[1] and all(re.fullmatch(deployment.ID_PATTERN, i) for i in ids)


def test_the_configured_id_wins_and_must_be_a_label_value(monkeypatch):
    monkeypatch.setattr("airflow.sdk.Variable", StoredVariables())
    monkeypatch.setenv("TPU_RL_DEPLOYMENT_ID", "team-a")
    assert deployment.deployment_id() == "team-a"
    monkeypatch.setenv("TPU_RL_DEPLOYMENT_ID", "Team A")
    with pytest.raises(deployment.DeploymentError, match="label value"):
        deployment.deployment_id()


def test_a_malformed_stored_id_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.delenv("TPU_RL_DEPLOYMENT_ID", raising=False)
    stored = StoredVariables()
    stored.values["tpu_rl_deployment_id"] = "Not A Label!"
    monkeypatch.setattr("airflow.sdk.Variable", stored)
    with pytest.raises(deployment.DeploymentError, match="Variable tpu_rl_deployment_id"):
        deployment.deployment_id()


@pytest.mark.parametrize(("raw", "minutes"), [(None, 4320.0), ("90", 90.0), ("1.5", 1.5)])
def test_dagrun_timeout_from_the_environment(monkeypatch, raw, minutes):
    if raw is None:
        monkeypatch.delenv("TPU_RL_DAGRUN_TIMEOUT_MINUTES", raising=False)
    else:
        monkeypatch.setenv("TPU_RL_DAGRUN_TIMEOUT_MINUTES", raw)
    assert deployment.dagrun_timeout_minutes() == minutes


@pytest.mark.parametrize("raw", ["0", "-5", "soon", "inf", "nan", "1e12", "525601"])
def test_a_bad_dagrun_timeout_is_refused(monkeypatch, raw):
    monkeypatch.setenv("TPU_RL_DAGRUN_TIMEOUT_MINUTES", raw)
    with pytest.raises(deployment.DeploymentError, match="positive number"):
        deployment.dagrun_timeout_minutes()


def test_a_missing_connection_is_named(monkeypatch):
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_nowhere")
    with pytest.raises(deployment.DeploymentError, match="'hf_nowhere' cannot be read"):
        deployment.hf_token()
