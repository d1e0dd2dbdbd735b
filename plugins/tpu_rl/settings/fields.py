"""The run's settings, declared once: RunSettings, each field with its default and metadata
(tpu_rl.settings.metadata says what the metadata holds)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tpu_rl.settings import text_rules as rule
from tpu_rl.settings.choices import (
    Approval,
    ApprovalTimeoutAnswer,
    Capacity,
    ClusterMode,
    DType,
    EvalMetric,
    ExportCheckpoint,
    Optimizer,
    RematPolicy,
)
from tpu_rl.settings.images import (
    PATHWAYS_PROXY_SERVER_IMAGE,
    PATHWAYS_SERVER_IMAGE,
    TUTORIAL_IMAGE,
)
from tpu_rl.settings.metadata import AXIS, COUNT, DAY, LENGTH, Section, plain

ESSENTIALS, CLOUD, MODEL = Section.ESSENTIALS, Section.CLOUD, Section.MODEL
GRPO, RUN = Section.GRPO, Section.RUN
TUTORIAL_MODEL = "google/gemma-4-26b-a4b-it"


@dataclass(frozen=True)
class RunSettings:
    """What one post-training run uses; names are the tutorial's, in lower case.

    ESSENTIALS (the form's open section, tpu_rl.settings.metadata.Section) are what the tutorial
    has a user change: where the run goes, its TPU capacity, the model and the training length.
    """

    # Google Cloud and the cluster
    project: str = ESSENTIALS.name("Project", rule.PROJECT_ID)
    region: str = ESSENTIALS.name("Region", rule.GCE)
    zone: str = ESSENTIALS.name("Zone", rule.GCE)
    cluster_name: str = ESSENTIALS.name("Cluster name", rule.GCE)
    gcs_bucket: str = ESSENTIALS.name("GCS bucket", rule.BUCKET)
    cluster_mode: ClusterMode = ESSENTIALS.choice(ClusterMode, "Cluster mode")
    keep_cluster: bool = CLOUD.setting(False, "Keep cluster")
    capacity: Capacity = ESSENTIALS.choice(Capacity, "TPU capacity")
    reservation: str = ESSENTIALS.setting(
        "", "Reservation", may_be_empty=True, text=rule.RESERVATION
    )
    capacity_ladder: str = CLOUD.setting("", "Capacity ladder", may_be_empty=True, text=rule.LADDER)
    authorized_cidr: str = CLOUD.setting("0.0.0.0/0", "Authorized CIDR", text=rule.CIDR)
    cluster_toolkit_version: str = CLOUD.setting(
        "v1.103.0", "Cluster Toolkit version", text=rule.VERSION
    )
    compute_type: str = CLOUD.setting("ct6e-standard-4t", "Compute type", text=rule.GCE)
    tpu_type: str = CLOUD.setting("v6e-32", "TPU type", text=rule.GCE)
    topology: str = CLOUD.setting("4x8", "Topology", text=rule.TOPOLOGY)
    cluster_nodepool_count: int = CLOUD.setting(1, "Slices", bounds=(1, 64))
    namespace: str = CLOUD.setting("default", "Namespace", text=rule.DNS_LABEL)
    kueue_queue: str = CLOUD.setting(
        "user-queue", "Kueue queue", may_be_empty=True, text=rule.DNS_LABEL
    )
    client_service_account: str = CLOUD.setting(
        "", "Storage service account", may_be_empty=True, text=rule.DNS_SUBDOMAIN
    )
    # Model and images
    model_name: str = ESSENTIALS.setting("gemma4-26b", "MaxText model", text=rule.MODEL_NAME)
    hf_model_path: str = ESSENTIALS.setting(
        TUTORIAL_MODEL, "Hugging Face model", text=rule.HF_REPO_ID
    )
    hf_revision: str = MODEL.setting("main", "Hugging Face revision", text=rule.HF_REVISION)
    tokenizer_path: str = ESSENTIALS.setting(
        TUTORIAL_MODEL, "Tokenizer", maxtext=True, text=rule.HF_REPO_ID
    )
    cloud_image_name: str = MODEL.image(TUTORIAL_IMAGE, "MaxText image")
    pathways_server_image: str = MODEL.image(PATHWAYS_SERVER_IMAGE, "Pathways server image")
    pathways_proxy_server_image: str = MODEL.image(
        PATHWAYS_PROXY_SERVER_IMAGE, "Pathways proxy image"
    )
    allow_unpinned_images: bool = MODEL.setting(False, "Allow unpinned images")
    optimizer: Optimizer = MODEL.choice(Optimizer, "Optimizer")
    weight_dtype: DType = MODEL.setting(DType.BFLOAT16, "Weight dtype", choices=DType)
    scan_layers: bool = MODEL.setting(False, "Scan layers")
    # MaxText GRPO flags (dots as underscores): declared in train_rl's flag order, the tutorial's
    # (tpu_rl.jobs.maxtext_flags)
    data_template_path: str = GRPO.maxtext(
        "maxtext/examples/chat_templates/openmathinstruct2_rl.json",
        "Chat template",
        text=rule.FREE_TEXT,
    )
    num_batches: int = ESSENTIALS.maxtext(50, "Training steps", bounds=(1, 10_000_000))
    batch_size: int = GRPO.maxtext(4, "Batch size", bounds=(1, 65_536))
    train_micro_batch_size: int = GRPO.maxtext(2, "Micro batch size", bounds=(1, 65_536))
    max_target_length: int = GRPO.maxtext(640, "Max target length", bounds=LENGTH)
    max_prefill_predict_length: int = GRPO.maxtext(256, "Max prefill length", bounds=LENGTH)
    mu_dtype: DType = GRPO.maxtext(DType.BFLOAT16, "mu dtype", choices=DType)
    grad_dtype: DType = GRPO.maxtext(DType.BFLOAT16, "grad dtype", choices=DType)
    rollout_tensor_parallelism: int = GRPO.maxtext(4, "Rollout TP", bounds=COUNT)
    rollout_expert_parallelism: int = GRPO.maxtext(1, "Rollout EP", bounds=COUNT)
    trainer_devices_fraction: float = GRPO.maxtext(0.5, "Trainer fraction")
    sampler_devices_fraction: float = GRPO.maxtext(0.5, "Sampler fraction")
    ici_tensor_parallelism: int = GRPO.maxtext(2, "ICI TP", bounds=AXIS)
    ici_expert_parallelism: int = GRPO.maxtext(4, "ICI EP", bounds=AXIS)
    ici_fsdp_parallelism: int = GRPO.maxtext(-1, "ICI FSDP", bounds=AXIS)
    hbm_utilization_vllm: float = GRPO.maxtext(0.7, "vLLM HBM share")
    remat_policy: RematPolicy = GRPO.maxtext(RematPolicy.FULL, "Remat policy", choices=RematPolicy)
    async_scheduling: bool = GRPO.maxtext(False, "Async scheduling")
    allow_split_physical_axes: bool = GRPO.maxtext(True, "Split physical axes")
    ragged_gather_reduce_fallback: bool = GRPO.maxtext(True, "Ragged gather fallback")
    enable_dp_attention: bool = GRPO.maxtext(False, "DP attention")
    decode_sampling_temperature: float = GRPO.maxtext(0.8, "Sampling temperature")
    decode_sampling_top_k: int = GRPO.maxtext(50, "Sampling top-k", bounds=(1, 1_000_000))
    decode_sampling_nucleus_p: float = GRPO.maxtext(0.95, "Sampling top-p")
    learning_rate: float = GRPO.maxtext(2e-5, "Learning rate")
    learning_rate_schedule_steps: int = GRPO.maxtext(
        100, "LR schedule steps", bounds=(1, 100_000_000)
    )
    # rl.yml's 50 leaves no checkpoint to resume from
    checkpoint_period: int = GRPO.maxtext(25, "Checkpoint period", bounds=(1, 10_000_000))
    rl_num_generations: int = GRPO.setting(  # group_size asks for at least 2
        4, "Generations per prompt", bounds=COUNT, maxtext="rl.num_generations"
    )
    rl_reshard_chunk_size: int = GRPO.setting(
        4, "Reshard chunk", bounds=COUNT, maxtext="rl.reshard_chunk_size"
    )
    debug: bool = GRPO.maxtext(True, "Debug")
    vllm_hf_overrides: str = GRPO.maxtext(
        '{"architectures": ["MaxTextForCausalLM"]}', "vLLM HF overrides", text=rule.JSON_TEXT
    )
    extra_train_args: list[str] = GRPO.setting(
        [], "Extra training flags", may_be_empty=True, text=rule.FREE_TEXT
    )
    # Run control
    backend_restarts: int = RUN.setting(0, "Backend restarts", bounds=(0, 1000))
    max_training_restarts: int = RUN.setting(2, "Training resumes", bounds=(0, 100))
    min_reward_gain: float = RUN.setting(0.0, "Minimum reward gain")
    gate_metrics: dict[str, float] = RUN.setting({}, "Gate metrics", may_be_empty=True)
    export_checkpoint: ExportCheckpoint = RUN.choice(ExportCheckpoint, "Exported checkpoint")
    best_metric: EvalMetric = RUN.choice(EvalMetric, "Best checkpoint metric")
    min_gain_over_champion: dict[str, float] = RUN.setting(
        {"mean_reward": 0.0}, "Minimum gain over the champion"
    )
    poll_interval_seconds: int = RUN.setting(30, "Poll interval (s)", bounds=(1, 3600))
    pending_timeout_minutes: int = RUN.setting(60, "Pending timeout (min)", bounds=(1, 7 * DAY))
    rung_wait_seconds: int = RUN.setting(900, "Rung wait (s)", bounds=(1, 7 * DAY * 60))
    cluster_timeout_minutes: int = RUN.limit(90, "Cluster", DAY)
    conversion_timeout_minutes: int = RUN.limit(180, "Conversion", 7 * DAY)
    training_timeout_minutes: int = RUN.limit(720, "Training", 30 * DAY)
    export_timeout_minutes: int = RUN.limit(180, "Export", 7 * DAY)
    approval: Approval = RUN.choice(Approval, "Approval")
    approval_timeout_minutes: int = RUN.limit(DAY, "Approval", 30 * DAY)
    approval_timeout_answer: ApprovalTimeoutAnswer = RUN.choice(
        ApprovalTimeoutAnswer, "Answer when the approval times out"
    )
    champion_eval_timeout_minutes: int = RUN.limit(60, "Champion evaluation", 7 * DAY)

    def __post_init__(self) -> None:
        """A choice given as its plain value becomes its enum member; any other value stays as
        given, for validation to name."""
        for f in CHOICE_FIELDS:
            try:
                member = f.metadata["choices"](getattr(self, f.name))
            except ValueError:
                continue
            object.__setattr__(self, f.name, member)

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON holds them: choices as their plain values."""
        return {name: plain(value) for name, value in dataclasses.asdict(self).items()}

    @property
    def chips(self) -> int:
        """Chips in one slice, from the topology (0 when the topology is malformed)."""
        try:
            a, b = (int(x) for x in self.topology.split("x"))
        except ValueError:
            return 0
        return a * b


SETTING_FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(RunSettings)}
CHOICE_FIELDS = tuple(f for f in SETTING_FIELDS.values() if f.metadata["choices"])
REQUIRED_SETTINGS = tuple(name for name, f in SETTING_FIELDS.items() if f.metadata["required"])
# May be left empty: an emptied field (the trigger form sends null) reads as empty, not as the
# default.
OPTIONAL_SETTINGS = tuple(name for name, f in SETTING_FIELDS.items() if f.metadata["may_be_empty"])
