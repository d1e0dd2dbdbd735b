"""The run's settings, declared once: RunSettings, each field with its default and metadata
(tpu_rl.settings.metadata says what the metadata holds)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tpu_rl.settings import text_rules as rule
from tpu_rl.settings.choices import Capacity, ClusterMode, DType, Optimizer, RematPolicy
from tpu_rl.settings.images import (
    PATHWAYS_PROXY_SERVER_IMAGE,
    PATHWAYS_SERVER_IMAGE,
    TUTORIAL_IMAGE,
)
from tpu_rl.settings.metadata import AXIS, COUNT, DAY, LENGTH, Section, plain

CLOUD, MODEL, GRPO, RUN = Section.CLOUD, Section.MODEL, Section.GRPO, Section.RUN
TUTORIAL_MODEL = "google/gemma-4-26b-a4b-it"


@dataclass(frozen=True)
class RunSettings:
    """What one post-training run uses; names are the tutorial's, in lower case."""

    # Google Cloud and the cluster
    project: str = CLOUD.name("Project", "Google Cloud project ID (PROJECT).", rule.PROJECT_ID)
    region: str = CLOUD.name(
        "Region", "Region of the TPU reservation and the cluster (REGION).", rule.GCE
    )
    zone: str = CLOUD.name("Zone", "Zone of the TPU reservation, inside `region` (ZONE).", rule.GCE)
    cluster_name: str = CLOUD.name(
        "Cluster name", "GKE cluster / Cluster Toolkit deployment name (CLUSTER_NAME).", rule.GCE
    )
    gcs_bucket: str = CLOUD.name(
        "GCS bucket",
        "Bucket for checkpoints, exports and terraform state (GCS_BUCKET).",
        rule.BUCKET,
    )
    cluster_mode: ClusterMode = CLOUD.choice(
        ClusterMode,
        "Cluster mode",
        "`create`: deploy with Cluster Toolkit and destroy at the end; "
        "`existing`: use the named cluster as it is.",
    )
    keep_cluster: bool = CLOUD.setting(
        False, "Keep cluster", "Do not destroy a cluster this run created (TPUs keep billing)."
    )
    capacity: Capacity = CLOUD.choice(
        Capacity,
        "TPU capacity",
        "How the TPU pool gets its VMs: `reservation` (a static pool in a specific reservation, "
        "the tutorial's), `flex_start` (Dynamic Workload Scheduler, scales from zero) or `spot` "
        "(preemptible Spot VMs in a static pool, billed from deploy to destroy, as gcluster "
        "renders it). With cluster_mode=existing: what the existing pool is.",
    )
    reservation: str = CLOUD.setting(
        "",
        "Reservation",
        "TPU v6e reservation name (RESERVATION); needed to create a cluster with "
        "capacity=reservation, empty with flex_start and spot.",
        may_be_empty=True,
        text=rule.RESERVATION,
    )
    authorized_cidr: str = CLOUD.setting(
        "0.0.0.0/0",
        "Authorized CIDR",
        "Network allowed to reach the cluster's control plane (the tutorial uses 0.0.0.0/0).",
        text=rule.CIDR,
    )
    cluster_toolkit_version: str = CLOUD.setting(
        "v1.103.0", "Cluster Toolkit version", "gcluster release to deploy with.", text=rule.VERSION
    )
    compute_type: str = CLOUD.setting(
        "ct6e-standard-4t", "Compute type", "TPU VM machine type (COMPUTE_TYPE).", text=rule.GCE
    )
    tpu_type: str = CLOUD.setting("v6e-32", "TPU type", "TPU slice type (TPU_TYPE).", text=rule.GCE)
    topology: str = CLOUD.setting(
        "4x8", "Topology", "TPU slice topology, matching `tpu_type`.", text=rule.TOPOLOGY
    )
    cluster_nodepool_count: int = CLOUD.setting(
        1, "Slices", "Number of TPU slices / node pools (CLUSTER_NODEPOOL_COUNT).", bounds=(1, 64)
    )
    namespace: str = CLOUD.setting(
        "default", "Namespace", "Kubernetes namespace for the run's objects.", text=rule.DNS_LABEL
    )
    kueue_queue: str = CLOUD.setting(
        "user-queue",
        "Kueue queue",
        "LocalQueue for TPU workloads (the blueprint creates `user-queue`); empty: no Kueue.",
        may_be_empty=True,
        text=rule.DNS_LABEL,
    )
    client_service_account: str = CLOUD.setting(
        "",
        "Storage service account",
        "Kubernetes service account, bound by Workload Identity to a Google service account "
        "with storage access, for the conversion, training client and export pods (the "
        "blueprint creates `workload-identity-k8s-sa`); empty: the pods use the host's "
        "network and so the node pool's service account, as the tutorial does.",
        may_be_empty=True,
        text=rule.DNS_SUBDOMAIN,
    )
    # Model and images
    model_name: str = MODEL.setting(
        "gemma4-26b", "MaxText model", "MaxText model name (MODEL_NAME).", text=rule.MODEL_NAME
    )
    hf_model_path: str = MODEL.setting(
        TUTORIAL_MODEL,
        "Hugging Face model",
        "Hugging Face repository of the base model.",
        text=rule.HF_REPO_ID,
    )
    hf_revision: str = MODEL.setting(
        "main",
        "Hugging Face revision",
        "Branch, tag or commit of the base model to convert (to_maxtext --revision); a commit "
        "pins it. Keys the converted model's folder with the model and scan_layers.",
        text=rule.HF_REVISION,
    )
    tokenizer_path: str = MODEL.setting(
        TUTORIAL_MODEL, "Tokenizer", "Tokenizer for training.", maxtext=True, text=rule.HF_REPO_ID
    )
    cloud_image_name: str = MODEL.image(
        TUTORIAL_IMAGE, "MaxText image", "Container image with MaxText (CLOUD_IMAGE_NAME)."
    )
    pathways_server_image: str = MODEL.image(
        PATHWAYS_SERVER_IMAGE, "Pathways server image", "Server and worker (MaxText 0.2.4's pin)."
    )
    pathways_proxy_server_image: str = MODEL.image(
        PATHWAYS_PROXY_SERVER_IMAGE, "Pathways proxy image", "proxy_server (MaxText 0.2.4's pin)."
    )
    allow_unpinned_images: bool = MODEL.setting(
        False, "Allow unpinned images", "Accept images tagged `latest` (a scheduled run drifts)."
    )
    optimizer: Optimizer = MODEL.choice(
        Optimizer,
        "Optimizer",
        "`adafactor`: the tutorial's patch of MaxText's optax.adamw; `adamw`: MaxText as is.",
    )
    weight_dtype: DType = MODEL.setting(
        DType.BFLOAT16,
        "Weight dtype",
        "Weights dtype for vLLM rollouts and the export.",
        choices=DType,
    )
    scan_layers: bool = MODEL.setting(False, "Scan layers", "MaxText scan_layers, in every step.")
    # MaxText GRPO flags (dots as underscores): declared in train_rl's flag order, the tutorial's
    # (tpu_rl.jobs.maxtext_flags)
    data_template_path: str = GRPO.setting(
        "maxtext/examples/chat_templates/openmathinstruct2_rl.json",
        "Chat template",
        "MaxText data_template_path.",
        maxtext=True,
        text=rule.FREE_TEXT,
    )
    num_batches: int = GRPO.setting(
        50, "Batches", "MaxText num_batches (training steps).", bounds=(1, 10_000_000), maxtext=True
    )
    batch_size: int = GRPO.maxtext(4, "Batch size", bounds=(1, 65_536))
    train_micro_batch_size: int = GRPO.maxtext(2, "Micro batch size", bounds=(1, 65_536))
    max_target_length: int = GRPO.maxtext(640, "Max target length", bounds=LENGTH)
    max_prefill_predict_length: int = GRPO.maxtext(256, "Max prefill length", bounds=LENGTH)
    mu_dtype: DType = GRPO.maxtext(DType.BFLOAT16, "mu dtype", choices=DType)
    grad_dtype: DType = GRPO.maxtext(DType.BFLOAT16, "grad dtype", choices=DType)
    rollout_tensor_parallelism: int = GRPO.maxtext(4, "Rollout TP", bounds=COUNT)
    rollout_expert_parallelism: int = GRPO.maxtext(1, "Rollout EP", bounds=COUNT)
    trainer_devices_fraction: float = GRPO.setting(
        0.5, "Trainer fraction", "Share of the slice's chips for the trainer.", maxtext=True
    )
    sampler_devices_fraction: float = GRPO.setting(
        0.5, "Sampler fraction", "Share of the slice's chips for the vLLM sampler.", maxtext=True
    )
    ici_tensor_parallelism: int = GRPO.maxtext(2, "ICI TP", bounds=AXIS)
    ici_expert_parallelism: int = GRPO.maxtext(4, "ICI EP", bounds=AXIS)
    ici_fsdp_parallelism: int = GRPO.setting(
        -1,
        "ICI FSDP",
        "MaxText ici_fsdp_parallelism (-1: the rest of the trainer's chips).",
        bounds=AXIS,
        maxtext=True,
    )
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
    checkpoint_period: int = GRPO.setting(  # rl.yml's 50 leaves no checkpoint to resume from
        25,
        "Checkpoint period",
        "MaxText checkpoint_period: steps between checkpoints; a resume after lost capacity "
        "recomputes at most this many. Below num_batches while max_training_restarts > 0.",
        bounds=(1, 10_000_000),
        maxtext=True,
    )
    rl_num_generations: int = GRPO.setting(  # group_size asks for at least 2
        4,
        "Generations per prompt",
        "MaxText rl.num_generations (GRPO group size).",
        bounds=COUNT,
        maxtext="rl.num_generations",
    )
    rl_reshard_chunk_size: int = GRPO.setting(
        4,
        "Reshard chunk",
        "MaxText rl.reshard_chunk_size.",
        bounds=COUNT,
        maxtext="rl.reshard_chunk_size",
    )
    debug: bool = GRPO.maxtext(True, "Debug")
    vllm_hf_overrides: str = GRPO.setting(
        '{"architectures": ["MaxTextForCausalLM"]}',
        "vLLM HF overrides",
        "MaxText vllm_hf_overrides (JSON).",
        maxtext=True,
        text=rule.JSON_TEXT,
    )
    extra_train_args: list[str] = GRPO.setting(
        [],
        "Extra training flags",
        "More MaxText key=value flags appended to train_rl (not ones set above).",
        may_be_empty=True,
        text=rule.FREE_TEXT,
    )
    # Run control
    backend_restarts: int = RUN.setting(
        0,
        "Backend restarts",
        "Pathways JobSet failurePolicy.maxRestarts (--restarts).",
        bounds=(0, 1000),
    )
    max_training_restarts: int = RUN.setting(
        2,
        "Training resumes",
        "How many times training resumes from its newest checkpoint after TPU capacity is "
        "lost (preemption, flex-start reclaim); 0: the run fails instead.",
        bounds=(0, 100),
    )
    min_reward_gain: float = RUN.setting(
        0.0, "Minimum reward gain", "Export only when post mean_reward >= pre mean_reward + this."
    )
    poll_interval_seconds: int = RUN.setting(
        30, "Poll interval (s)", "How often waits ask the cluster.", bounds=(1, 3600)
    )
    pending_timeout_minutes: int = RUN.setting(
        60,
        "Pending timeout (min)",
        "How long pods may wait for TPU capacity or Kueue.",
        bounds=(1, 7 * DAY),
    )
    cluster_timeout_minutes: int = RUN.limit(90, "Cluster", "gcluster deploy / destroy", DAY)
    conversion_timeout_minutes: int = RUN.limit(
        180, "Conversion", "the HF -> MaxText conversion Job", 7 * DAY
    )
    training_timeout_minutes: int = RUN.limit(
        720, "Training", "GRPO training, deferred time included", 30 * DAY
    )
    export_timeout_minutes: int = RUN.limit(180, "Export", "the MaxText -> HF export Job", 7 * DAY)

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
# May be left empty; the trigger form sends an emptied field as null, read as empty.
OPTIONAL_SETTINGS = tuple(name for name, f in SETTING_FIELDS.items() if f.metadata["may_be_empty"])
