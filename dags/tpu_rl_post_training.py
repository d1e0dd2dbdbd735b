"""GRPO post-training of an open model with MaxText + Pathways on a Cloud TPU slice in GKE.

Thin wiring only: every step lives in the `tpu_rl` package under plugins/.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

# Named here so the DAG processor imports them once in its parent process
# (`_pre_import_airflow_modules`), not in every forked parse: our operators build on them.
import airflow.providers.google.cloud.operators.gcs
import airflow.providers.google.cloud.operators.kubernetes_engine  # noqa: F401
from airflow.sdk import DAG, Asset

from tpu_rl import deployment
from tpu_rl.callbacks import cleanup_after_timeout
from tpu_rl.docs import DAG_DOC, document
from tpu_rl.limits import WORK, limit_tasks
from tpu_rl.links import add_links
from tpu_rl.notify import RunFailureNotifier, notify_failures
from tpu_rl.operators.cluster_toolkit import GclusterDeployOperator, GclusterDestroyOperator
from tpu_rl.operators.jobs import ConvertJobOperator, ExportJobOperator, RunJobOperator
from tpu_rl.operators.kubernetes import (
    BackendStartOperator,
    BackendStopOperator,
    CleanupKubernetesOperator,
    HfTokenSecretOperator,
)
from tpu_rl.operators.rewards import RunRewardSensor
from tpu_rl.operators.steps import (
    EnsureBucketOperator,
    RewardGateOperator,
    RunOutcomeOperator,
    ValidateSettingsOperator,
    VerifyExportOperator,
)
from tpu_rl.params import dag_params

EXPORTED_MODEL = Asset(name="tpu_rl_exported_model")
CLUSTER = {
    "project_id": "{{ params.project }}",
    "location": "{{ params.region }}",
    "cluster_name": "{{ params.cluster_name }}",
    # deployment configuration, not a Param: whoever triggers a run does not pick credentials
    "gcp_conn_id": deployment.gcp_conn_id(),
}

with DAG(
    dag_id="tpu_rl_post_training",
    description="GRPO post-training with MaxText + Pathways on Cloud TPU in GKE",
    doc_md=DAG_DOC,
    # environment variables, not Airflow Variables: no lookup on every parse of this file
    schedule=os.environ.get("TPU_RL_SCHEDULE") or None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=deployment.dagrun_timeout_minutes()),
    # the scheduler skips the teardowns of a timed-out run: the first removes its Kubernetes
    # objects; the notifier tells people when no task's own callback did (a timed-out run)
    on_failure_callback=[cleanup_after_timeout, RunFailureNotifier()],
    tags=["tpu", "rl", "maxtext", "gke"],
    # a task's limit: the defaults' until it runs (limit_tasks below), then the run's settings'
    # (each operator's pre_execute: tpu_rl.limits.RunLimited); a failed task tells the
    # deployer's channels (notify_failures below)
    default_args={"owner": "ml-platform"},
) as dag:
    validate = ValidateSettingsOperator(task_id="validate")
    ensure_bucket = EnsureBucketOperator(
        task_id="ensure_bucket",
        bucket_name="{{ params.gcs_bucket }}",
        project_id="{{ params.project }}",
        location="{{ params.region }}",
        storage_class="STANDARD",  # the operator's MULTI_REGIONAL is refused in a region
        gcp_conn_id=deployment.gcp_conn_id(),
    )
    create_cluster = GclusterDeployOperator(task_id="create_cluster")
    hf_token_secret = HfTokenSecretOperator(task_id="hf_token_secret", **CLUSTER)
    job_args = {**CLUSTER, "deferrable": True, "wait_until_job_complete": True}
    convert = ConvertJobOperator(task_id="convert", **job_args)
    start_backend = BackendStartOperator(
        task_id="start_backend",
        trigger_rule="none_failed",  # conversion may be skipped
        **CLUSTER,
    )
    train = RunJobOperator(
        task_id="train", build="train_job", wait_until_job_complete=False, **CLUSTER
    )
    wait_for_rewards = RunRewardSensor(task_id="wait_for_rewards", **CLUSTER)
    passed_gate = RewardGateOperator(task_id="gate", rewards=wait_for_rewards.output)
    export = ExportJobOperator(task_id="export", **job_args)
    verified = VerifyExportOperator(task_id="verify", outlets=[EXPORTED_MODEL])
    # beside the gate and export: makes sure the TPUs are free; the run goes on without it
    stop_backend = BackendStopOperator(task_id="stop_backend", **CLUSTER)

    # Setups: a teardown runs when at least one of its setups succeeded. ensure_bucket (which
    # holds the terraform state) precedes the cluster, so a half-deployed cluster is destroyed.
    cleanup_kubernetes = CleanupKubernetesOperator(
        task_id="cleanup_kubernetes", **CLUSTER
    ).as_teardown(setups=[create_cluster, hf_token_secret])
    cleanup_cluster = GclusterDestroyOperator(task_id="cleanup_cluster").as_teardown(
        setups=[ensure_bucket, create_cluster]
    )
    outcome = RunOutcomeOperator(
        task_id="outcome",
        final_task="verify",
        watched=[*WORK, "stop_backend", "cleanup_kubernetes", "cleanup_cluster"],
        # a failed step has told people already; the verdict speaks for a run marked failed
        on_failure_callback=[RunFailureNotifier(only_when_untold=True)],
    ).as_teardown(on_failure_fail_dagrun=True)

    validate >> ensure_bucket >> create_cluster >> hf_token_secret >> convert >> start_backend
    start_backend >> train >> wait_for_rewards >> passed_gate >> export >> verified
    # export also hangs on the wait directly: when training fails, the first scheduler pass
    # marks gate, export and stop_backend upstream_failed, and cleanup starts on the next pass
    # (a teardown waits for every task between its setups and itself).
    wait_for_rewards >> export
    # clearing export (the UI's Clear) clears the setups too: export waits for them to run again
    # (the cleared run's cluster was destroyed) instead of racing the redeploy
    hf_token_secret >> export
    wait_for_rewards >> stop_backend
    # verify only reads the bucket: the TPUs and the cluster go while it checks the files
    [export, stop_backend] >> cleanup_kubernetes >> cleanup_cluster >> outcome
    verified >> outcome
    limit_tasks(dag)
    document(dag)
    add_links(dag)
    notify_failures(dag)
    # The Params last, on the DAG alone: a task made while the DAG has them keeps a deep copy,
    # which Airflow's serializer validates Param by Param (jsonschema) on every parse, 85% of
    # the parse (make bench, parse_overhead_ms); at run time the DAG's are merged in anyway
    # (airflow.sdk.definitions.param.process_params).
    dag.params = dag_params()
