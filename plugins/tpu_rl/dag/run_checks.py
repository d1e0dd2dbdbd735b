"""The run's settings checked before any cloud call: the settings themselves, that the run's
time limits fit the DAG's dagrun_timeout, and the deployment's connections."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from tpu_rl import deployment
from tpu_rl.dag.run_limits import budget_problem
from tpu_rl.settings.run_settings import SettingsError, load_settings


def validate_settings(params: dict[str, Any], dagrun_timeout_minutes: float) -> dict[str, Any]:
    """The run's settings, checked; every problem in one failure, before any cloud call.

    Also that the run's time limits fit the DAG's dagrun_timeout, and that the deployment's
    connections are of the right type.
    """
    try:
        settings = load_settings(dict(params))
    except SettingsError as err:
        raise AirflowFailException(str(err)) from err
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
