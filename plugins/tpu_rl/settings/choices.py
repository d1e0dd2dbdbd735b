"""The closed sets of values some settings take, as StrEnums: a member equals its value, so
`settings.cluster_mode == "existing"` holds as it did for plain strings."""

from __future__ import annotations

from enum import StrEnum


class ClusterMode(StrEnum):
    """Whether the run deploys its own cluster or uses a named one as it is."""

    CREATE = "create"
    EXISTING = "existing"


class Capacity(StrEnum):
    """How the TPU pool gets its VMs."""

    RESERVATION = "reservation"
    # a future reservation in calendar mode: its VMs from the window's start to its end
    CALENDAR = "calendar"
    FLEX_START = "flex_start"
    SPOT = "spot"


class Optimizer(StrEnum):
    """`adafactor`: the tutorial's patch of MaxText's optax.adamw; `adamw`: MaxText as is."""

    ADAFACTOR = "adafactor"
    ADAMW = "adamw"


class ModelImpl(StrEnum):
    """Which model the rollout's vLLM runs on TPU (tpu-inference's MODEL_IMPL_TYPE, envs.py):
    `auto` resolves per architecture, `flax_nnx` its JAX models, `vllm` vLLM's own."""

    AUTO = "auto"
    FLAX_NNX = "flax_nnx"
    VLLM = "vllm"


class DType(StrEnum):
    """The dtypes MaxText takes for weights, optimizer state and gradients."""

    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"
    FLOAT16 = "float16"


class ExportCheckpoint(StrEnum):
    """Which committed checkpoint step the run exports (tpu_rl.checkpoints.checkpoint_choice)."""

    LAST = "last"
    BEST = "best"


class EvalMetric(StrEnum):
    """A metric of MaxText's evaluation lines (EVAL_METRICS: in the tables' order)."""

    MEAN_REWARD = "mean_reward"
    ACCURACY = "accuracy"
    PARTIAL_ACCURACY = "partial_accuracy"
    FORMAT_ACCURACY = "format_accuracy"


# The metrics a gate or a checkpoint choice may name (percentages but mean_reward): those of
# EvalMetric, in the order of the tables and charts.
EVAL_METRICS: tuple[str, ...] = (
    EvalMetric.ACCURACY,
    EvalMetric.PARTIAL_ACCURACY,
    EvalMetric.FORMAT_ACCURACY,
    EvalMetric.MEAN_REWARD,
)


class RematPolicy(StrEnum):
    """MaxText's remat_policy values."""

    FULL = "full"
    MINIMAL = "minimal"
    MINIMAL_FLASH = "minimal_flash"
    MINIMAL_OFFLOADED = "minimal_offloaded"
    SAVE_DOT_WITH_CONTEXT_EXCEPT_MLP = "save_dot_with_context_except_mlp"
    SAVE_DOT_EXCEPT_MLPWI = "save_dot_except_mlpwi"
    SAVE_DOT_EXCEPT_MLP = "save_dot_except_mlp"
    SAVE_QKV_PROJ = "save_qkv_proj"
    SAVE_OUT_PROJ = "save_out_proj"
    QKV_PROJ_OFFLOADED = "qkv_proj_offloaded"
    CUSTOM = "custom"


class Approval(StrEnum):
    """Whether a person approves a verified export before it is promoted."""

    NONE = "none"
    REQUIRED = "required"


class ApprovalTimeoutAnswer(StrEnum):
    """What an approval no one answered in time answers (and the option its form highlights)."""

    REJECT = "reject"
    APPROVE = "approve"


class HealthAction(StrEnum):
    """What a run does when the training health watchdog stops training (tpu_rl.watch.health)."""

    STOP = "stop"
    EXPORT_HEALTHY = "export_healthy"
    RESUME = "resume"  # once, from the newest healthy checkpoint (operators.training_resume)


class SpendLimitAction(StrEnum):
    """What a run whose projected spend passes max_spend_usd does after the save it stops at
    (tpu_rl.watch.progress)."""

    EXPORT = "export"
    FAIL = "fail"
