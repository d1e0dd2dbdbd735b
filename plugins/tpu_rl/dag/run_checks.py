"""The run's valid settings checked before any cloud call: that its time limits fit the DAG's
dagrun_timeout, and the deployment's connections."""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException

from tpu_rl import deployment
from tpu_rl.dag.run_limits import budget_problem
from tpu_rl.settings.run_settings import RunSettings, SettingsError


def check_run(settings: RunSettings, dagrun_timeout_minutes: float) -> dict[str, Any]:
    """The run's valid settings checked before any cloud call: that the run's time limits fit
    the DAG's dagrun_timeout, and that the deployment's connections are of the right type;
    every problem in one failure. Returns the settings as a dict."""
    problems = []
    if problem := budget_problem(settings, dagrun_timeout_minutes):
        problems.append(problem)
    for check in (deployment.check_gcp_connection, deployment.hf_token):
        try:
            check()
        except deployment.DeploymentError as err:
            problems.append(str(err))
    if problems:
        raise AirflowFailException(str(SettingsError(problems)))
    return settings.to_dict()
