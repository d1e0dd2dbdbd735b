"""What the deployer decides, not whoever triggers a run: connections, run timeout, identity.

Each value comes from the environment (`TPU_RL_<NAME>`) or else from Airflow's configuration
(`[tpu_rl] <name>`, also settable as `AIRFLOW__TPU_RL__<NAME>`); none needs the metadata DB, so
the DAG file reads them at parse time and every task process reads the same values.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys

DEFAULT_DAGRUN_TIMEOUT_MINUTES = 72 * 60  # a backstop: the per-task limits end first
MAX_DAGRUN_TIMEOUT_MINUTES = 365 * 24 * 60
DEPLOYMENT_LABEL = "tpu-rl.dev/deployment"
DAG_LABEL = "tpu-rl.dev/dag"
# Connection types that carry an API token (the HF token is the password), never a database.
HF_CONN_TYPES = {"http", "https", "generic", "huggingface", "hf"}
GCP_CONN_TYPES = {"google_cloud_platform"}
# compiled on first use (re's cache), not on every parse of the DAG file
ID_PATTERN = r"[a-z0-9]([-_a-z0-9]{0,61}[a-z0-9])?"


class DeploymentError(ValueError):
    """A deployment setting is malformed or names an unfit connection."""


def _airflow_conf(section: str, key: str) -> str:
    """A value of Airflow's configuration when Airflow runs this process ('' otherwise: offline
    tools such as `make plan` must not import Airflow)."""
    if "airflow.configuration" not in sys.modules:
        return os.environ.get(f"AIRFLOW__{section.upper()}__{key.upper()}", "").strip()
    from airflow.configuration import conf

    return (conf.get(section, key, fallback="") or "").strip()


def _value(name: str) -> str | None:
    if value := os.environ.get(f"TPU_RL_{name.upper()}", "").strip():
        return value
    return _airflow_conf("tpu_rl", name) or None


def dagrun_timeout_minutes() -> float:
    """The main DAG's dagrun_timeout in minutes (decimals allowed)."""
    raw = _value("dagrun_timeout_minutes")
    if raw is None:
        return float(DEFAULT_DAGRUN_TIMEOUT_MINUTES)
    try:
        minutes = float(raw)
    except ValueError:
        minutes = 0.0
    if not 0 < minutes <= MAX_DAGRUN_TIMEOUT_MINUTES:  # false for nan; inf overflows timedelta
        raise DeploymentError(
            "TPU_RL_DAGRUN_TIMEOUT_MINUTES: must be a positive number of minutes, at most "
            f"{MAX_DAGRUN_TIMEOUT_MINUTES} (a year), got {raw!r}"
        )
    return minutes


def hf_conn_id() -> str:
    """The Airflow connection whose password is the Hugging Face token."""
    return _value("hf_conn_id") or "huggingface_default"


def gcp_conn_id() -> str:
    """The Airflow connection with the Google credentials of every cloud call."""
    return _value("gcp_conn_id") or "google_cloud_default"


def deployment_id() -> str:
    """This Airflow deployment's identity, a label value on everything the runs create.

    Default: a hash of the API server's base URL, the same for every process of a deployment.
    """
    if explicit := _value("deployment_id"):
        if not re.fullmatch(ID_PATTERN, explicit):
            raise DeploymentError(
                f"TPU_RL_DEPLOYMENT_ID: {explicit!r} must be 1-63 lower-case letters, digits, "
                "'-' or '_', starting and ending with a letter or digit (a label value)"
            )
        return explicit
    base_url = _airflow_conf("api", "base_url") or "http://localhost:8080/"
    return "af-" + hashlib.sha256(base_url.rstrip("/").encode()).hexdigest()[:12]


def checked_connection(conn_id: str, allowed_types: set[str], purpose: str) -> object:
    """The connection, after checking its type fits `purpose` (a DB password is no HF token)."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as err:  # AirflowNotFoundException, or the secrets backend's own
        raise DeploymentError(f"connection {conn_id!r} cannot be read: {err}") from err
    conn_type = (conn.conn_type or "").lower()
    if conn_type not in allowed_types:
        raise DeploymentError(
            f"connection {conn_id!r} has type {conn.conn_type!r}; {purpose} needs one of "
            f"{sorted(allowed_types)} (set by the deployer, not by a run)"
        )
    return conn


def hf_token() -> str:
    """The Hugging Face token, registered with Airflow's secrets masker (with and without its
    prefix, and its wrapped pieces: tpu_rl.token_masking) before it is returned."""
    from tpu_rl.token_masking import register_token

    conn_id = hf_conn_id()
    conn = checked_connection(conn_id, HF_CONN_TYPES, "the Hugging Face token")
    token = getattr(conn, "password", None) or ""
    if not token:
        raise DeploymentError(
            f"connection {conn_id!r} has no password: put the Hugging Face token there"
        )
    register_token(token)
    return token


def check_gcp_connection() -> str:
    """The GCP connection id, after checking the connection is a Google Cloud one."""
    conn_id = gcp_conn_id()
    checked_connection(conn_id, GCP_CONN_TYPES, "Google Cloud calls")
    return conn_id
