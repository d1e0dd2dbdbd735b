"""Airflow operators that deploy and destroy the run's cluster with Cluster Toolkit."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from tpu_rl import deployment
from tpu_rl.limits import RunLimited, time_left

# tpu_rl.cluster_toolkit (tarfile, urllib, subprocess plumbing), the blueprint and the settings
# are imported where a task runs them, not on every parse of the DAG files.

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.blueprint import ClusterToolkitPlan
    from tpu_rl.settings import RunSettings

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


class _GclusterOperator(RunLimited, BaseOperator):
    """Renders the Cluster Toolkit inputs into a fresh folder and runs gcluster there.

    `settings`: the cluster's settings; None: the run's (its Params).
    """

    template_fields: Sequence[str] = ("settings", "gcp_conn_id", "state_prefix")
    template_fields_renderers = {"settings": "json"}

    def __init__(
        self,
        *,
        settings: Mapping[str, Any] | None = None,
        gcp_conn_id: str | None = None,
        state_prefix: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.gcp_conn_id = gcp_conn_id
        self.state_prefix = state_prefix
        self._proc: subprocess.Popen | None = None

    def _commands(self, steps: ClusterToolkitPlan) -> list[list[str]]:
        raise NotImplementedError

    def _skip_reason(self, settings: RunSettings) -> str | None:
        """Why this operator must leave the cluster alone, if it must."""
        if settings.cluster_mode == "existing":
            return "cluster_mode=existing: the cluster is not this run's"
        return None

    def execute(self, context: Context) -> None:
        from tpu_rl import blueprint, cluster_toolkit
        from tpu_rl.settings import SettingsError, load_settings

        raw = self.settings if self.settings is not None else context["params"]
        try:
            settings = load_settings(dict(raw))
        except SettingsError as err:
            raise AirflowSkipException(f"settings invalid, so no cluster was made: {err}") from err
        if reason := self._skip_reason(settings):
            self.log.info("Nothing to do: %s", reason)
            return
        bundle = cluster_toolkit.ensure_bundle(
            settings.cluster_toolkit_version, cluster_toolkit.cache_dir()
        )
        cluster_toolkit.require_terraform()
        prefix = self.state_prefix or blueprint.default_state_prefix(settings)
        self.log.info(
            "Cluster %s, terraform state gs://%s/%s",
            settings.cluster_name,
            settings.gcs_bucket,
            prefix,
        )
        conn_id = self.gcp_conn_id or deployment.check_gcp_connection()
        timeout = settings.cluster_timeout_minutes * 60.0
        if (left := time_left(self)) is not None:  # the run's deadline may come first
            timeout = min(timeout, left.total_seconds())
        with (
            tempfile.TemporaryDirectory(prefix=f"gcluster-{settings.cluster_name}-") as tmp,
            google_env(conn_id, settings.project) as (env, secrets),
        ):
            steps = cluster_toolkit.prepare_workdir(Path(tmp), bundle, settings, prefix)
            for argv in self._commands(steps):
                cluster_toolkit.run_gcluster(
                    argv,
                    Path(tmp),
                    self.log,
                    timeout=timeout,
                    env=env,
                    secrets=secrets,
                    started=self._started,
                )

    def _started(self, proc: subprocess.Popen) -> None:
        self._proc = proc

    def on_kill(self) -> None:
        from tpu_rl import cluster_toolkit

        if self._proc is not None:
            cluster_toolkit.stop(self._proc)


class GclusterDeployOperator(_GclusterOperator):
    """`gcluster deploy` of the edited tutorial blueprint; re-running it is safe (-w)."""

    ui_color = "#d5e8d4"

    def _commands(self, steps: ClusterToolkitPlan) -> list[list[str]]:
        return [steps.deploy]


class GclusterDestroyOperator(_GclusterOperator):
    """Rebuild the deployment folder (`gcluster create`), then `gcluster destroy` it.

    Works from any worker, after a half-way deploy, and when nothing is left (terraform
    destroys an empty state without error), so retries are safe.
    """

    ui_color = "#f8cecc"

    def _skip_reason(self, settings: RunSettings) -> str | None:
        if settings.keep_cluster:
            return "keep_cluster is set: the cluster stays (its TPUs keep billing)"
        return super()._skip_reason(settings)

    def _commands(self, steps: ClusterToolkitPlan) -> list[list[str]]:
        return [steps.create, steps.destroy]
