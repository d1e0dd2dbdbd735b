"""The run's valid settings checked before anything costs money: that its time limits fit the
DAG's dagrun_timeout, the deployment's connections and promotion settings, and an existing
cluster's kind."""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException

from tpu_rl import deployment
from tpu_rl.dag.run_limits import budget_problem, dag_limits
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.fields import RunSettings
from tpu_rl.settings.run_settings import SettingsError


def check_run(settings: RunSettings, dag: Any) -> dict[str, Any]:
    """The run's valid settings checked before anything costs money: that the run's time limits
    fit the DAG's dagrun_timeout, that the deployment's connections are of the right type and its
    promotion settings well-formed, and with cluster_mode=existing that the cluster exists and
    is GKE Standard (read from the Container API); every problem in one failure. Returns the
    settings as a dict."""
    problems = []
    timeout_minutes = dag.dagrun_timeout.total_seconds() / 60
    if problem := budget_problem(settings, timeout_minutes, dag_limits(dag.tasks)):
        problems.append(problem)
    conn_id = None
    try:
        conn_id = deployment.check_gcp_connection()
    except deployment.DeploymentError as err:
        problems.append(str(err))
    try:
        deployment.hf_token()
    except deployment.DeploymentError as err:
        problems.append(str(err))
    # what promote will need, refused now rather than after the training and the approval
    problems += deployment.promotion_problems(settings.region)
    if conn_id and settings.cluster_mode == ClusterMode.EXISTING:
        # the one cloud call before any spend (a read); the GKE client only when needed
        from tpu_rl.cluster.existing import existing_cluster_problem

        if problem := existing_cluster_problem(settings, conn_id):
            problems.append(problem)
    if problems:
        raise AirflowFailException(str(SettingsError(problems)))
    return settings.to_dict()
