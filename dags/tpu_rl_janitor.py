"""Second line of defence: removes what tpu_rl_post_training left when its cleanup did not run.

Thin wiring only: the rules live in tpu_rl.janitor, the I/O in tpu_rl.operators.janitor.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

# Named here so the DAG processor imports them once in its parent process
# (`_pre_import_airflow_modules`), not in every forked parse: the sweep builds on them, and
# destroy_cluster's module on the provider's GCS operator (ensure_bucket's base).
import airflow.providers.google.cloud.hooks.kubernetes_engine
import airflow.providers.google.cloud.operators.gcs
import airflow.providers.google.cloud.operators.kubernetes_engine  # noqa: F401
from airflow.sdk import DAG, task

from tpu_rl.janitor.params import janitor_params
from tpu_rl.names import JANITOR_DAG_ID
from tpu_rl.operators.cluster import DestroyClusterOperator
from tpu_rl.operators.janitor import JanitorSweepOperator, verdict
from tpu_rl.settings.params import default_settings

DOC = """
### Janitor for tpu_rl_post_training
Finds the Kubernetes objects this package labelled (the kinds of `tpu_rl.kube.swept`) in the
region's labelled clusters (and in the clusters named in the Params), removes those no queued or
running run owns and older than `grace_minutes` (in that table's order), then destroys labelled
clusters no active run uses and older than the grace period, with `gcluster destroy` as
`cleanup_cluster` does. `existing_clusters` are never destroyed. `dry_run` (the default) only
reports. Defaults of the Params: the JSON Variable `tpu_rl_janitor_params`, read when the sweep
runs; the schedule: the environment variable `TPU_RL_JANITOR_SCHEDULE` (no lookup per parse).
It only touches what carries this Airflow deployment's identity (TPU_RL_DEPLOYMENT_ID, else the
Variable `tpu_rl_deployment_id` made on first use) and the label of tpu_rl_post_training.
"""
# environment, not an Airflow Variable: read when the file is parsed, so it must cost nothing
SCHEDULE = os.environ.get("TPU_RL_JANITOR_SCHEDULE") or "*/30 * * * *"

with DAG(
    dag_id=JANITOR_DAG_ID,
    description="Removes leftover Kubernetes objects and clusters of tpu_rl_post_training",
    doc_md=DOC,
    schedule=SCHEDULE,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=4),
    tags=["tpu", "rl", "gke", "janitor"],
    default_args={"owner": "ml-platform", "retries": 0},
) as dag:
    sweep = JanitorSweepOperator(task_id="sweep")

    @task
    def clusters_to_destroy(report: dict) -> list[dict]:
        return report["destroy_settings"]

    destroy = DestroyClusterOperator.partial(
        task_id="destroy_cluster",
        map_index_template="{{ task.settings['cluster_name'] }}",
        retries=1,
        execution_timeout=timedelta(minutes=default_settings().cluster_timeout_minutes + 10),
    ).expand(settings=clusters_to_destroy(sweep.output))

    @task(trigger_rule="all_done")
    def report(**context) -> dict:
        """Fails, listing it, when anything could not be removed (so an alert fires)."""
        return verdict(context)

    [sweep, destroy] >> report()
    # Last, on the DAG alone: tasks made while the DAG has Params keep copies that Airflow
    # validates Param by Param on every parse; at run time the DAG's are merged in anyway.
    dag.params = janitor_params()
