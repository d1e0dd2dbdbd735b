"""The Airflow operator that deploys or destroys the run's cluster with Cluster Toolkit.

One class for both commands: its code (tpu_rl.operators.gcluster_run: tarfile, subprocess plumbing,
the
blueprint, the settings) is imported where a task runs, not on every parse of the DAG files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from tpu_rl.dag.limits import RunLimited

if TYPE_CHECKING:
    import subprocess

    from airflow.sdk import Context

COMMANDS = ("deploy", "destroy")


class GclusterOperator(RunLimited, BaseOperator):
    """`gcluster deploy` (of the edited tutorial blueprint) or `gcluster destroy` of a cluster;
    re-running either is safe.

    `settings`: the cluster's settings; None: the run's (its Params). destroy leaves a cluster
    the settings keep (`keep_cluster`) or do not own (`cluster_mode=existing`).
    """

    template_fields: Sequence[str] = ("settings", "gcp_conn_id", "state_prefix")
    template_fields_renderers = {"settings": "json"}

    def __init__(
        self,
        *,
        command: str,
        settings: Mapping[str, Any] | None = None,
        gcp_conn_id: str | None = None,
        state_prefix: str | None = None,
        **kwargs: Any,
    ) -> None:
        if command not in COMMANDS:
            raise ValueError(f"command {command!r} is none of {', '.join(COMMANDS)}")
        super().__init__(**kwargs)
        self.command = command
        self.settings = settings
        self.gcp_conn_id = gcp_conn_id
        self.state_prefix = state_prefix
        self._proc: subprocess.Popen | None = None

    def execute(self, context: Context) -> None:
        from tpu_rl.operators.gcluster_run import run_command

        raw = self.settings if self.settings is not None else context["params"]
        run_command(self, self.command, raw, self._started)

    def _started(self, proc: subprocess.Popen) -> None:
        self._proc = proc

    def on_kill(self) -> None:
        from tpu_rl.cluster import toolkit as cluster_toolkit

        if self._proc is not None:
            cluster_toolkit.stop(self._proc)
