"""GRPO post-training of an open model with MaxText + Pathways on a Cloud TPU slice in GKE.

Thin wiring only: every step lives in the `tpu_rl` package under plugins/.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

# named so the DAG processor's parent imports them once, not each forked parse: ours build on them
# (approve is the standard provider's ApprovalOperator, compare_champion uses its SkipMixin)
import airflow.providers.google.cloud.operators.gcs
import airflow.providers.google.cloud.operators.kubernetes_engine
import airflow.providers.standard.operators.hitl
import airflow.providers.standard.utils.skipmixin  # noqa: F401
from airflow.sdk import DAG, Asset

from tpu_rl import deployment
from tpu_rl.dag.callbacks import cleanup_after_timeout
from tpu_rl.dag.docs import DAG_DOC
from tpu_rl.dag.params import dag_params
from tpu_rl.names import DAG_ID
from tpu_rl.operators.backend import StartPathwaysBackendOperator, StopPathwaysBackendOperator
from tpu_rl.operators.champion import CompareChampionOperator, EvaluateChampionOperator
from tpu_rl.operators.checks import (
    RewardGateOperator,
    RunOutcomeOperator,
    ValidateRunOperator,
    VerifyExportOperator,
)
from tpu_rl.operators.cluster import (
    CreateClusterOperator,
    DestroyClusterOperator,
    EnsureBucketOperator,
)
from tpu_rl.operators.cluster_objects import CleanupKubernetesOperator, CreateTokenSecretOperator
from tpu_rl.operators.heldout import EvaluateHeldoutOperator
from tpu_rl.operators.job_steps import (
    ConvertCheckpointOperator,
    ExportCheckpointOperator,
    StartTrainingOperator,
)
from tpu_rl.operators.preflight import PreflightOperator
from tpu_rl.operators.promotion import ApproveExportOperator, PromoteExportOperator
from tpu_rl.operators.rewards import WaitForRewardsSensor
from tpu_rl.operators.run_step import RunStep
from tpu_rl.report.notify import RunFailureNotifier, notify_failures

# Airflow's serializer finds the fields it stores for each operator class that has none cached,
# each time from a throwaway BaseOperator, the same fields for every class (task-sdk 1.3.2
# airflow/sdk/bases/operator.py:1541-1552): found once on the steps' shared base, the 20 step
# classes inherit them (one such build a parse, not 20).
RunStep.get_serialized_fields()

EXPORTED_MODEL = Asset(name="tpu_rl_exported_model")
CHAMPION_MODEL = Asset(name="tpu_rl_champion_model")

with DAG(
    dag_id=DAG_ID,
    description="GRPO post-training with MaxText + Pathways on Cloud TPU in GKE",
    doc_md=DAG_DOC,
    schedule=os.environ.get("TPU_RL_SCHEDULE") or None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=deployment.dagrun_timeout_minutes()),
    # a timed-out run's teardowns are skipped: the first cleans up, the notifier tells people
    on_failure_callback=[cleanup_after_timeout, RunFailureNotifier()],
    tags=["tpu", "rl", "maxtext", "gke"],
    # the deployment's connection, not a Param: whoever triggers a run does not pick credentials
    default_args={"owner": "ml-platform", "gcp_conn_id": deployment.gcp_conn_id()},
) as dag:
    # each step's task id, doc, time limit, tries and console links are its operator's
    validate = ValidateRunOperator()
    preflight = PreflightOperator()  # read-only checks of the real project (its module says why)
    ensure_bucket = EnsureBucketOperator()
    create_cluster = CreateClusterOperator()
    hf_token_secret = CreateTokenSecretOperator()
    convert = ConvertCheckpointOperator()
    start_backend = StartPathwaysBackendOperator(trigger_rule="none_failed")  # convert may skip
    train = StartTrainingOperator()
    wait_for_rewards = WaitForRewardsSensor()
    passed_gate = RewardGateOperator(rewards=wait_for_rewards.output)
    export = ExportCheckpointOperator(rewards=wait_for_rewards.output)
    verified = VerifyExportOperator(outlets=[EXPORTED_MODEL])
    # the deployment's champion, scored on the run's backend before it goes (skipped on the
    # first run: evaluate_champion has no champion, so none_failed)
    evaluate_champion = EvaluateChampionOperator()
    compare_champion = CompareChampionOperator()
    # beside the gate and export: makes sure the TPUs are free; the run goes on without it
    stop_backend = StopPathwaysBackendOperator(trigger_rule="none_failed")
    # skips unless heldout_tasks; on the slice's chips, which the backend holds until
    # stop_backend (after evaluate_champion); export's Job waits for them just the same
    evaluate_heldout = EvaluateHeldoutOperator(rewards=wait_for_rewards.output)

    # a teardown runs once one of its setups succeeded: a half-deployed cluster is destroyed
    cleanup_kubernetes = CleanupKubernetesOperator().as_teardown(
        setups=[create_cluster, hf_token_secret]
    )
    cleanup_cluster = DestroyClusterOperator().as_teardown(setups=[ensure_bucket, create_cluster])
    # after the cleanups: a person may answer hours later, with no TPUs held
    approve = ApproveExportOperator()
    promote = PromoteExportOperator(outlets=[CHAMPION_MODEL])
    outcome = RunOutcomeOperator(
        final_task=verified.task_id,  # and every other task: none may have failed
        # a failed step told people already; the verdict speaks for a run marked failed
        on_failure_callback=[RunFailureNotifier(only_when_untold=True)],
    ).as_teardown(on_failure_fail_dagrun=True)

    validate >> preflight >> ensure_bucket >> create_cluster >> hf_token_secret >> convert
    convert >> start_backend
    start_backend >> train >> wait_for_rewards >> passed_gate >> export >> verified
    # a failed wait fails export in the same scheduler pass (cleanup starts one pass sooner);
    # clearing export clears the setups too: it waits for the redeploy (its doc)
    [wait_for_rewards, hf_token_secret] >> export
    wait_for_rewards >> evaluate_champion >> stop_backend
    # the gate judges, and export takes, the step the held-out evaluation scored best
    stop_backend >> evaluate_heldout >> passed_gate
    [verified, evaluate_champion] >> compare_champion
    # verify only reads the bucket: the TPUs and the cluster go while it checks the files
    # (the held-out evaluation's Job is over before export starts: gate waits for it)
    [export, stop_backend] >> cleanup_kubernetes >> cleanup_cluster >> outcome
    # promotion, after verify (through compare) and the cleanups: only an export that beats the
    # champion is asked about (compare skips the rest); outcome follows it
    [cleanup_cluster, compare_champion] >> approve >> promote >> outcome
    # per task: its failure notice
    notify_failures(dag)
    dag.params = dag_params()  # last, on the DAG alone: see dag_params
