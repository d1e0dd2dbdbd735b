"""The run's steps, in the order they run, and what is read from their declarations (each
operator's `step_id`, `limit`, `step_doc` and console links) by task id: the time budget, the
docs and links checks. Imported where a task runs, not when the DAG file is parsed."""

from __future__ import annotations

from tpu_rl.dag.limits import CLEANUP, WORK, Limit
from tpu_rl.operators.backend import StartPathwaysBackendOperator, StopPathwaysBackendOperator
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
from tpu_rl.operators.job_steps import (
    ConvertCheckpointOperator,
    ExportCheckpointOperator,
    StartTrainingOperator,
)
from tpu_rl.operators.rewards import WaitForRewardsSensor
from tpu_rl.operators.run_step import RunStep

RUN_STEPS: tuple[type[RunStep], ...] = (
    ValidateRunOperator,
    EnsureBucketOperator,
    CreateClusterOperator,
    CreateTokenSecretOperator,
    ConvertCheckpointOperator,
    StartPathwaysBackendOperator,
    StartTrainingOperator,
    WaitForRewardsSensor,
    RewardGateOperator,
    ExportCheckpointOperator,
    VerifyExportOperator,
    StopPathwaysBackendOperator,
    CleanupKubernetesOperator,
    DestroyClusterOperator,
    RunOutcomeOperator,
)

LIMITS: dict[str, Limit] = {step.step_id: step.limit for step in RUN_STEPS}
WORK_LIMITS = {task: limit for task, limit in LIMITS.items() if limit.role == WORK}
CLEANUP_LIMITS = {task: limit for task, limit in LIMITS.items() if limit.role == CLEANUP}
TASK_DOCS: dict[str, str] = {step.step_id: step.step_doc for step in RUN_STEPS}
LINKS_BY_TASK = {
    step.step_id: tuple(step.operator_extra_links)
    for step in RUN_STEPS
    if step is not EnsureBucketOperator  # the provider's own link
}
