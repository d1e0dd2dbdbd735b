"""The run's settings as declared: names, types, defaults, UI titles and descriptions.

Without the dataclass machinery: tpu_rl.settings.run_settings builds the RunSettings dataclass from
the
declaration here, tpu_rl.settings.param_specs the DAG's Params (params.json, which the parse reads).
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from types import SimpleNamespace
from typing import Any

TUTORIAL_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
TUTORIAL_MODEL = "google/gemma-4-26b-a4b-it"


def setting(default: Any, title: str, description: str | None, **schema: Any) -> Any:
    """A dataclass field carrying its UI title, description and extra JSON-schema keywords."""
    meta = {"title": title, "description": description, "schema": schema}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def maxtext(default: Any, title: str, **schema: Any) -> Any:
    """A setting passed to MaxText as the flag of its own name (described by `describe`)."""
    return setting(default, title, None, **schema)


def choice(title: str, description: str, *options: str) -> Any:
    """A setting taking one of `options`; the first is the default."""
    return setting(options[0], title, description, enum=list(options))


def limit(default: int, step: str, what: str) -> Any:
    """A time limit in minutes for one step of the run."""
    return setting(default, f"{step} timeout (min)", f"Limit for {what}.")


class RunSettings:
    """What one post-training run uses; names are the tutorial's, in lower case.

    Declared here, a plain class: tpu_rl.settings.run_settings makes it the frozen dataclass
    (import it from
    there), whose generated code costs ~12 ms, too much for every parse of the DAG file.
    """

    # Google Cloud and the cluster
    project: str = setting("", "Project", "Google Cloud project ID (PROJECT).")
    region: str = setting("", "Region", "Region of the TPU reservation and the cluster (REGION).")
    zone: str = setting("", "Zone", "Zone of the TPU reservation, inside `region` (ZONE).")
    cluster_name: str = setting(
        "", "Cluster name", "GKE cluster / Cluster Toolkit deployment name (CLUSTER_NAME)."
    )
    gcs_bucket: str = setting(
        "", "GCS bucket", "Bucket for checkpoints, exports and terraform state (GCS_BUCKET)."
    )
    cluster_mode: str = choice(
        "Cluster mode",
        "`create`: deploy with Cluster Toolkit and destroy at the end; "
        "`existing`: use the named cluster as it is.",
        "create",
        "existing",
    )
    keep_cluster: bool = setting(
        False, "Keep cluster", "Do not destroy a cluster this run created (TPUs keep billing)."
    )
    capacity: str = choice(
        "TPU capacity",
        "How the TPU pool gets its VMs: `reservation` (a static pool in a specific reservation, "
        "the tutorial's), `flex_start` (Dynamic Workload Scheduler, scales from zero) or `spot` "
        "(preemptible, scales from zero). With cluster_mode=existing: what the existing pool is.",
        "reservation",
        "flex_start",
        "spot",
    )
    reservation: str = setting(
        "",
        "Reservation",
        "TPU v6e reservation name (RESERVATION); needed to create a cluster with "
        "capacity=reservation, empty with flex_start and spot.",
    )
    authorized_cidr: str = setting(
        "0.0.0.0/0",
        "Authorized CIDR",
        "Network allowed to reach the cluster's control plane (the tutorial uses 0.0.0.0/0).",
    )
    cluster_toolkit_version: str = setting(
        "v1.103.0", "Cluster Toolkit version", "gcluster release to deploy with."
    )
    compute_type: str = setting(
        "ct6e-standard-4t", "Compute type", "TPU VM machine type (COMPUTE_TYPE)."
    )
    tpu_type: str = setting("v6e-32", "TPU type", "TPU slice type (TPU_TYPE).")
    topology: str = setting("4x8", "Topology", "TPU slice topology, matching `tpu_type`.")
    cluster_nodepool_count: int = setting(
        1, "Slices", "Number of TPU slices / node pools (CLUSTER_NODEPOOL_COUNT).", minimum=1
    )
    namespace: str = setting("default", "Namespace", "Kubernetes namespace for the run's objects.")
    kueue_queue: str = setting(
        "user-queue",
        "Kueue queue",
        "LocalQueue for TPU workloads (the blueprint creates `user-queue`); empty: no Kueue.",
    )
    client_service_account: str = setting(
        "",
        "Storage service account",
        "Kubernetes service account, bound by Workload Identity to a Google service account "
        "with storage access, for the conversion, training client and export pods (the "
        "blueprint creates `workload-identity-k8s-sa`); empty: the pods use the host's "
        "network and so the node pool's service account, as the tutorial does.",
    )
    # Model and images
    model_name: str = setting("gemma4-26b", "MaxText model", "MaxText model name (MODEL_NAME).")
    hf_model_path: str = setting(
        TUTORIAL_MODEL, "Hugging Face model", "Hugging Face repository of the base model."
    )
    tokenizer_path: str = setting(TUTORIAL_MODEL, "Tokenizer", "Tokenizer for training.")
    cloud_image_name: str = setting(
        TUTORIAL_IMAGE, "MaxText image", "Container image with MaxText (CLOUD_IMAGE_NAME)."
    )
    pathways_image_tag: str = setting(
        "latest", "Pathways image tag", "Tag of the Pathways proxy_server and server images."
    )
    optimizer: str = choice(
        "Optimizer",
        "`adafactor`: the tutorial's patch of MaxText's optax.adamw; `adamw`: MaxText as is.",
        "adafactor",
        "adamw",
    )
    weight_dtype: str = setting(
        "bfloat16", "Weight dtype", "Weights dtype for vLLM rollouts and the export."
    )
    scan_layers: bool = setting(False, "Scan layers", "MaxText scan_layers, in every step.")
    # MaxText GRPO flags (dots as underscores)
    data_template_path: str = setting(
        "maxtext/examples/chat_templates/openmathinstruct2_rl.json",
        "Chat template",
        "MaxText data_template_path.",
    )
    num_batches: int = setting(50, "Batches", "MaxText num_batches (training steps).", minimum=1)
    batch_size: int = maxtext(4, "Batch size", minimum=1)
    train_micro_batch_size: int = maxtext(2, "Micro batch size", minimum=1)
    max_target_length: int = maxtext(640, "Max target length")
    max_prefill_predict_length: int = maxtext(256, "Max prefill length")
    mu_dtype: str = maxtext("bfloat16", "mu dtype")
    grad_dtype: str = maxtext("bfloat16", "grad dtype")
    rollout_tensor_parallelism: int = maxtext(4, "Rollout TP")
    rollout_expert_parallelism: int = maxtext(1, "Rollout EP")
    trainer_devices_fraction: float = setting(
        0.5, "Trainer fraction", "Share of the slice's chips for the trainer."
    )
    sampler_devices_fraction: float = setting(
        0.5, "Sampler fraction", "Share of the slice's chips for the vLLM sampler."
    )
    ici_tensor_parallelism: int = maxtext(2, "ICI TP")
    ici_expert_parallelism: int = maxtext(4, "ICI EP")
    ici_fsdp_parallelism: int = setting(
        -1, "ICI FSDP", "MaxText ici_fsdp_parallelism (-1: the rest of the trainer's chips)."
    )
    hbm_utilization_vllm: float = maxtext(0.7, "vLLM HBM share")
    remat_policy: str = maxtext("full", "Remat policy")
    async_scheduling: bool = maxtext(False, "Async scheduling")
    allow_split_physical_axes: bool = maxtext(True, "Split physical axes")
    ragged_gather_reduce_fallback: bool = maxtext(True, "Ragged gather fallback")
    enable_dp_attention: bool = maxtext(False, "DP attention")
    decode_sampling_temperature: float = maxtext(0.8, "Sampling temperature")
    decode_sampling_top_k: int = maxtext(50, "Sampling top-k")
    decode_sampling_nucleus_p: float = maxtext(0.95, "Sampling top-p")
    learning_rate: float = maxtext(2e-5, "Learning rate")
    learning_rate_schedule_steps: int = maxtext(100, "LR schedule steps")
    checkpoint_period: int = setting(
        50,
        "Checkpoint period",
        "MaxText checkpoint_period: steps between checkpoints; a resume after lost capacity "
        "recomputes at most this many.",
        minimum=1,
    )
    rl_num_generations: int = setting(
        4, "Generations per prompt", "MaxText rl.num_generations (GRPO group size)."
    )
    rl_reshard_chunk_size: int = setting(4, "Reshard chunk", "MaxText rl.reshard_chunk_size.")
    debug: bool = maxtext(True, "Debug")
    vllm_hf_overrides: str = setting(
        '{"architectures": ["MaxTextForCausalLM"]}',
        "vLLM HF overrides",
        "MaxText vllm_hf_overrides (JSON).",
    )
    extra_train_args: list[str] = setting(
        [],
        "Extra training flags",
        "More MaxText key=value flags appended to train_rl (not ones set above).",
        items={"type": "string"},
    )
    # Run control
    backend_restarts: int = setting(
        0, "Backend restarts", "Pathways JobSet failurePolicy.maxRestarts (--restarts)."
    )
    max_training_restarts: int = setting(
        2,
        "Training resumes",
        "How many times training resumes from its newest checkpoint after TPU capacity is "
        "lost (preemption, flex-start reclaim); 0: the run fails instead.",
        minimum=0,
    )
    min_reward_gain: float = setting(
        0.0,
        "Minimum reward gain",
        "Export only when post mean_reward >= pre mean_reward + this.",
    )
    poll_interval_seconds: int = setting(
        30, "Poll interval (s)", "How often waits ask the cluster.", minimum=1
    )
    pending_timeout_minutes: int = setting(
        60, "Pending timeout (min)", "How long pods may wait for TPU capacity or Kueue."
    )
    cluster_timeout_minutes: int = limit(90, "Cluster", "gcluster deploy / destroy")
    conversion_timeout_minutes: int = limit(180, "Conversion", "the HF -> MaxText conversion Job")
    training_timeout_minutes: int = limit(720, "Training", "GRPO training, deferred time included")
    export_timeout_minutes: int = limit(180, "Export", "the MaxText -> HF export Job")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def chips(self) -> int:
        """Chips in one slice, from the topology (0 when the topology is malformed)."""
        try:
            a, b = (int(x) for x in self.topology.split("x"))
        except ValueError:
            return 0
        return a * b


def _declared(cls: type) -> dict[str, dataclasses.Field]:
    """The class's fields in declaration order, named and typed as @dataclass names them."""
    found = {}
    for name, kind in cls.__annotations__.items():
        f = cls.__dict__[name]
        f.name, f.type = name, kind
        found[name] = f
    return found


SETTING_FIELDS: dict[str, dataclasses.Field] = _declared(RunSettings)


def default_of(f: dataclasses.Field) -> Any:
    """A setting's default value."""
    return f.default_factory() if callable(f.default_factory) else f.default


# The defaults as attributes, as RunSettings() has them, without building it
# (tpu_rl.settings.run_settings).
DEFAULTS: Any = SimpleNamespace(**{name: default_of(f) for name, f in SETTING_FIELDS.items()})


def describe(f: dataclasses.Field) -> str:
    """A setting's description; a MaxText pass-through's names its flag."""
    return f.metadata["description"] or f"MaxText {f.name}."


# May be left empty; the trigger form sends an emptied field as null, read as empty.
OPTIONAL_SETTINGS = ("reservation", "kueue_queue", "client_service_account", "extra_train_args")
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}


def json_type(f: dataclasses.Field) -> str:
    """The JSON-schema type of a setting."""
    return _JSON_TYPES.get(str(f.type), "array")
