"""GRPO post-training of an open model with MaxText + Pathways on a Cloud TPU slice in GKE.

Thin wiring only: every step lives in the `tpu_rl` package under plugins/.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

# Named here so the DAG processor imports them once in its parent process
# (`_pre_import_airflow_modules`), not in every forked parse: our operators build on them.
import airflow.providers.google.cloud.operators.kubernetes_engine  # noqa: F401
from airflow.providers.google.cloud.operators.gcs import GCSCreateBucketOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Asset

from tpu_rl import manifests
from tpu_rl.docs import document
from tpu_rl.links import add_links
from tpu_rl.notify import RunFailureNotifier
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
    RewardGateOperator,
    ValidateSettingsOperator,
    VerifyExportOperator,
)
from tpu_rl.params import dag_params
from tpu_rl.settings import RunSettings

DEFAULTS = RunSettings()
EXPORTED_MODEL = Asset(name="tpu_rl_exported_model")
CLUSTER = {
    "project_id": "{{ params.project }}",
    "location": "{{ params.region }}",
    "cluster_name": "{{ params.cluster_name }}",
    "gcp_conn_id": "{{ params.gcp_conn_id }}",
}

DOC = """
### GRPO post-training on Cloud TPU (MaxText + Pathways)
The tutorial "Gemma 4 26B multi-host RL on TPU v6e", unattended: validate the settings, ensure
the bucket, deploy the cluster with Cluster Toolkit (or use an existing one), convert the model
to MaxText (skipped when converted already), start a headless Pathways backend, run the GRPO
client, follow its log until `Post RL Training`, stop the backend, gate on the reward, export to
Hugging Face format and check the files. `cleanup_*` always run and remove what the run created;
`run_succeeded` makes the run's state say whether the work succeeded.

Outputs: `gs://<gcs_bucket>/<model_name>/trained/<run>/` (checkpoints) and
`gs://<gcs_bucket>/<model_name>/hf-trained/<run>/` (export); `<run>` is `rl-` + a hash of the
run id, shown in every task's log and as the `tpu-rl.dev/run` label on every object.
"""


def minutes(value: int) -> timedelta:
    return timedelta(minutes=value)


with DAG(
    dag_id="tpu_rl_post_training",
    description="GRPO post-training with MaxText + Pathways on Cloud TPU in GKE",
    doc_md=DOC,
    # an environment variable, not an Airflow Variable: no lookup on every parse of this file
    schedule=os.environ.get("TPU_RL_SCHEDULE") or None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=24),
    tags=["tpu", "rl", "maxtext", "gke"],
    default_args={
        "owner": "ml-platform",
        "retries": 1,
        "on_failure_callback": RunFailureNotifier(),
    },
    on_failure_callback=RunFailureNotifier(),
) as dag:
    settings = ValidateSettingsOperator(task_id="validate", retries=0).output

    ensure_bucket = GCSCreateBucketOperator(
        task_id="ensure_bucket",
        bucket_name="{{ params.gcs_bucket }}",
        project_id="{{ params.project }}",
        location="{{ params.region }}",
        storage_class="STANDARD",  # the operator's MULTI_REGIONAL is refused in a region
        gcp_conn_id="{{ params.gcp_conn_id }}",
    )
    create_cluster = GclusterDeployOperator(
        task_id="create_cluster",
        settings=settings,
        execution_timeout=minutes(DEFAULTS.cluster_timeout_minutes),
    )
    hf_token_secret = HfTokenSecretOperator(task_id="hf_token_secret", **CLUSTER)
    job_args = {**CLUSTER, "deferrable": True, "wait_until_job_complete": True}
    convert = ConvertJobOperator(
        task_id="convert",
        execution_timeout=minutes(DEFAULTS.conversion_timeout_minutes),
        **job_args,
    )
    start_backend = BackendStartOperator(
        task_id="start_backend",
        trigger_rule="none_failed",
        execution_timeout=minutes(DEFAULTS.pending_timeout_minutes + 10),
        **CLUSTER,
    )
    train = RunJobOperator(
        task_id="train", build=manifests.train_job, wait_until_job_complete=False, **CLUSTER
    )
    wait_for_rewards = RunRewardSensor(
        task_id="wait_for_rewards",
        retries=0,
        **CLUSTER,
    )
    stop_backend = BackendStopOperator(task_id="stop_backend", **CLUSTER)
    passed_gate = RewardGateOperator(task_id="gate", rewards=wait_for_rewards.output, retries=0)
    export = ExportJobOperator(
        task_id="export",
        execution_timeout=minutes(DEFAULTS.export_timeout_minutes),
        **job_args,
    )
    verified = VerifyExportOperator(task_id="verify", outlets=[EXPORTED_MODEL])
    # upstream_failed whenever a work step failed, so the run's state is the truth
    run_succeeded = EmptyOperator(task_id="run_succeeded", trigger_rule="none_failed")

    cleanup_kubernetes = CleanupKubernetesOperator(
        task_id="cleanup_kubernetes",
        needs_task="hf_token_secret",
        trigger_rule="all_done",
        retries=3,
        **CLUSTER,
    )
    destroy_cluster = GclusterDestroyOperator(
        task_id="cleanup_cluster",
        settings=settings,
        trigger_rule="all_done",
        retries=3,
        execution_timeout=minutes(DEFAULTS.cluster_timeout_minutes),
    )

    work = [
        settings,
        ensure_bucket,
        create_cluster,
        hf_token_secret,
        convert,
        start_backend,
        train,
        wait_for_rewards,
        stop_backend,
        passed_gate,
        export,
        verified,
    ]
    settings >> ensure_bucket >> create_cluster >> hf_token_secret >> convert >> start_backend
    start_backend >> train >> wait_for_rewards >> stop_backend >> passed_gate >> export >> verified
    # The steps after the wait also hang on it directly: when training fails, one scheduler pass
    # marks them all upstream_failed and cleanup starts on the next, not a pass per step later.
    wait_for_rewards >> [passed_gate, export, verified]
    work >> run_succeeded
    work >> cleanup_kubernetes >> destroy_cluster
    document(dag)
    add_links(dag)
    # The Params last, on the DAG alone: a task made while the DAG has them keeps a deep copy,
    # which Airflow's serializer validates Param by Param (jsonschema) on every parse, 85% of
    # the parse (make bench, parse_overhead_ms); at run time the DAG's are merged in anyway
    # (airflow.sdk.definitions.param.process_params).
    dag.params = dag_params()
