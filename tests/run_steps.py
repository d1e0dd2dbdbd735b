"""The run's steps, in the order they run, and their time limits by task id (each operator's
`step_id` and `limit`): what the tests hold the DAG and the run's time budget against without
parsing the DAG file (the budget itself reads each task's `limit` where a task runs)."""

from __future__ import annotations

from tpu_rl.dag.limits import WORK, Limit
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
from tpu_rl.operators.job_steps import (
    ConvertCheckpointOperator,
    ExportCheckpointOperator,
    StartTrainingOperator,
)
from tpu_rl.operators.preflight import PreflightOperator
from tpu_rl.operators.promotion import ApproveExportOperator, PromoteExportOperator
from tpu_rl.operators.rewards import WaitForRewardsSensor
from tpu_rl.operators.run_step import RunStep

RUN_STEPS: tuple[type[RunStep], ...] = (
    ValidateRunOperator,
    PreflightOperator,
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
    EvaluateChampionOperator,
    CompareChampionOperator,
    StopPathwaysBackendOperator,
    CleanupKubernetesOperator,
    DestroyClusterOperator,
    ApproveExportOperator,
    PromoteExportOperator,
    RunOutcomeOperator,
)

LIMITS: dict[str, Limit] = {step.step_id: step.limit for step in RUN_STEPS}
WORK_LIMITS = {task: limit for task, limit in LIMITS.items() if limit.role == WORK}
