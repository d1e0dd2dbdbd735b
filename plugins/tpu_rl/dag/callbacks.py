"""The DAG's on_failure_callback: cleanup when the scheduler timed the run out.

On dagrun_timeout the scheduler fails the run and skips every unfinished task, teardowns
included; only this callback runs after it (in the dag-processor, which gives it tens of seconds
and the Task SDK's connections and XComs). It deletes the run's Jobs, JobSets and Secrets, which
hold the TPUs; a cluster the run created is left to the janitor (`gcluster destroy` takes far
longer than a callback may run), which destroys it once no active run uses it.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def cleanup_after_timeout(context: Any) -> dict[str, Any] | None:
    """Remove the timed-out run's Kubernetes objects; other failures have their teardowns."""
    if context.get("reason") != "timed_out":
        return None
    from airflow.sdk.execution_time.xcom import XCom

    from tpu_rl.layout import RunLayout
    from tpu_rl.names import DAG_ID
    from tpu_rl.operators.cluster_objects import CleanupKubernetesOperator
    from tpu_rl.settings.run_settings import SettingsError, load_settings

    run_id = context["run_id"]
    raw = XCom.get_one(key="return_value", dag_id=DAG_ID, task_id="validate", run_id=run_id)
    try:
        settings = load_settings(raw) if isinstance(raw, dict) else None
    except SettingsError:
        settings = None
    if settings is None:
        log.info("Run %s timed out before its settings were validated: nothing to remove", run_id)
        return None
    cleaner = CleanupKubernetesOperator(
        task_id="cleanup_after_timeout",
        project_id=settings.project,
        location=settings.region,
        cluster_name=settings.cluster_name,
    )
    try:
        removed, errors = cleaner.remove_run_objects(RunLayout(settings, run_id))
    except Exception as err:  # no cluster (it was never made), credentials: the janitor remains
        removed, errors = {}, [f"cluster {settings.cluster_name} unreachable: {err}"]
    cluster_left = settings.cluster_mode == "create" and not settings.keep_cluster
    log.warning(
        "Run %s timed out: removed %s%s%s",
        run_id,
        removed,
        f"; could not remove: {'; '.join(errors)}" if errors else "",
        f"; cluster {settings.cluster_name} is left to the janitor" if cluster_left else "",
    )
    return {"removed": removed, "errors": errors, "cluster_left": cluster_left}
