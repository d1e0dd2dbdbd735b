"""What GclusterOperator does in the worker: renders the Cluster Toolkit inputs into a fresh
folder and runs `gcluster` there with the connection's credentials (imported where it runs)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from tpu_rl import deployment
from tpu_rl.cluster import blueprint
from tpu_rl.cluster import toolkit as cluster_toolkit
from tpu_rl.dag.run_limits import time_left
from tpu_rl.settings.run_settings import RunSettings, SettingsError, load_settings

# Service-account key fields that must never reach a log.
KEY_SECRET_FIELDS = ("private_key", "private_key_id", "client_secret", "refresh_token")


@contextmanager
def google_env(gcp_conn_id: str, project: str) -> Iterator[tuple[dict[str, str], list[str]]]:
    """Environment for gcluster/terraform with the connection's credentials, and its secrets."""
    from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
    from airflow.sdk.log import mask_secret

    hook = GoogleBaseHook(gcp_conn_id=gcp_conn_id)
    with hook.provide_gcp_credential_file_as_context() as key_file:
        secrets = _key_secrets(key_file)
        for secret in secrets:
            mask_secret(secret)
        env = {
            **os.environ,  # GOOGLE_APPLICATION_CREDENTIALS is set here when the key is in Airflow
            "CLOUDSDK_CORE_PROJECT": project,
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
        }
        yield env, secrets


def _key_secrets(key_file: str | None) -> list[str]:
    if not key_file:
        return []  # application default credentials of the worker: nothing of ours to mask
    try:
        key = json.loads(Path(key_file).read_text())
    except (OSError, ValueError):
        return []
    return [str(key[f]) for f in KEY_SECRET_FIELDS if isinstance(key, dict) and key.get(f)]


def skip_reason(command: str, settings: RunSettings) -> str | None:
    """Why `command` must leave the cluster alone, if it must."""
    if command == "destroy" and settings.keep_cluster:
        return "keep_cluster is set: the cluster stays (its TPUs keep billing)"
    if settings.cluster_mode == "existing":
        return "cluster_mode=existing: the cluster is not this run's"
    return None


def commands(command: str, steps: blueprint.ClusterToolkitPlan) -> list[list[str]]:
    """deploy: `gcluster deploy` (-w: re-running is safe); destroy: rebuild the deployment
    folder (`gcluster create`), then destroy it, which works from any worker, after a half-way
    deploy, and when nothing is left."""
    return [steps.deploy] if command == "deploy" else [steps.create, steps.destroy]


def run_command(
    op: Any,
    command: str,
    raw_settings: Mapping[str, Any],
    started: Callable[[subprocess.Popen], None],
) -> None:
    """Run `gcluster <command>` for the cluster of `raw_settings` (a skip when they are
    invalid or the cluster is not this run's to change)."""
    try:
        settings = load_settings(dict(raw_settings))
    except SettingsError as err:
        raise AirflowSkipException(f"settings invalid, so no cluster was made: {err}") from err
    if reason := skip_reason(command, settings):
        op.log.info("Nothing to do: %s", reason)
        return
    bundle = cluster_toolkit.ensure_bundle(
        settings.cluster_toolkit_version, cluster_toolkit.cache_dir()
    )
    cluster_toolkit.require_terraform()
    prefix = op.state_prefix or blueprint.default_state_prefix(settings)
    op.log.info(
        "Cluster %s, terraform state gs://%s/%s", settings.cluster_name, settings.gcs_bucket, prefix
    )
    conn_id = op.gcp_conn_id or deployment.check_gcp_connection()
    timeout = settings.cluster_timeout_minutes * 60.0
    if (left := time_left(op)) is not None:  # the run's deadline may come first
        timeout = min(timeout, left.total_seconds())
    with (
        tempfile.TemporaryDirectory(prefix=f"gcluster-{settings.cluster_name}-") as tmp,
        google_env(conn_id, settings.project) as (env, secrets),
    ):
        steps = cluster_toolkit.prepare_workdir(Path(tmp), bundle, settings, prefix)
        for argv in commands(command, steps):
            cluster_toolkit.run_gcluster(
                argv, Path(tmp), op.log, timeout=timeout, env=env, secrets=secrets, started=started
            )
