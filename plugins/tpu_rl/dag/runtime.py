"""What every task derives from its Airflow context: the run's settings and layout."""

from __future__ import annotations

from typing import Any

from tpu_rl.layout import RunLayout
from tpu_rl.run_record import SETTINGS_TASK, recorded_deployment
from tpu_rl.settings.fields import RunSettings
from tpu_rl.settings.run_settings import SettingsError, load_settings


def layout_from_context(context: Any) -> RunLayout:
    """The run's layout from its Params, run id and deployment identity (validation errors, and
    a run whose identity was never recorded, raise SettingsError)."""
    settings = load_settings(dict(context["params"]))
    return RunLayout(on_current_rung(settings, context), context["run_id"], run_deployment(context))


def on_current_rung(settings: RunSettings, context: Any) -> RunSettings:
    """The settings on the capacity ladder's rung the TPU pool stands on (the ladder's record,
    tpu_rl.cluster.rung_record); as they are without a ladder or before the deploy."""
    from tpu_rl.cluster import ladder
    from tpu_rl.cluster.rung_record import recorded_rung

    if not settings.capacity_ladder or context["ti"].task_id == SETTINGS_TASK:
        return settings
    rung = recorded_rung(context["ti"])
    return ladder.at_rung(settings, rung) if rung else settings


def run_deployment(context: Any) -> str:
    """The deployment identity the run started with: `validate` reads the deployment's and
    records it (tpu_rl.run_record); every later task reads that record, never the setting."""
    from tpu_rl.deployment import deployment_id
    from tpu_rl.run_record import NoRunRecord

    ti = context["ti"]
    if ti.task_id == SETTINGS_TASK:
        return deployment_id()
    try:
        return recorded_deployment(ti.xcom_pull(task_ids=SETTINGS_TASK), context["run_id"])
    except NoRunRecord as err:  # validate failed or never ran: the run created nothing
        raise SettingsError([f"{err}: nothing of this run can exist"]) from err
