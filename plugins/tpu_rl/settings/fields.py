"""The run's settings, declared once: RunSettings, each field with its default and metadata
(tpu_rl.settings.metadata says what the metadata holds).

A new setting is one field here: its title, description and, for a train_rl flag, GRPO.maxtext
(or maxtext="dotted.name"), which puts it on the training command line in declaration order
(tpu_rl.jobs.maxtext_flags). Then `make params` regenerates the form's Params and the reference
(docs/settings.md); tests fail while either is stale.
"""

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
    HealthAction,
    ModelImpl,
    Optimizer,
    RematPolicy,
    SpendLimitAction,
)
from tpu_rl.settings.images import (
    PATHWAYS_PROXY_SERVER_IMAGE,
    PATHWAYS_SERVER_IMAGE,
    TUTORIAL_IMAGE,
)
from tpu_rl.settings.metadata import AXIS, COUNT, DAY, LENGTH, Section, plain
from tpu_rl.tpu import Slice, chips_in

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
    project: str = ESSENTIALS.required_name(
        "Project", rule.PROJECT_ID, description="Your Google Cloud project ID (tutorial: PROJECT)."
    )
    region: str = ESSENTIALS.required_name(
        "Region",
        rule.GCE,
        description="Region of your TPU capacity and of the cluster, e.g. us-east5 (tutorial: "
        "REGION).",
    )
    zone: str = ESSENTIALS.required_name(
        "Zone",
        rule.GCE,
        description="Zone of your TPU capacity, inside the region, e.g. us-east5-b (tutorial: "
        "ZONE).",
    )
    cluster_name: str = ESSENTIALS.required_name(
        "Cluster name",
        rule.CLUSTER_NAME,
        description="Name of the GKE cluster the run creates or uses: lower-case letters, digits "
        "and hyphens, at most 20 characters (tutorial: CLUSTER_NAME).",
    )
    gcs_bucket: str = ESSENTIALS.required_name(
        "GCS bucket",
        rule.BUCKET,
        description="Cloud Storage bucket (name only, no gs://) for checkpoints, the exported "
        "model and the cluster's Terraform state (tutorial: GCS_BUCKET).",
    )
    cluster_mode: ClusterMode = ESSENTIALS.choice(
        ClusterMode,
        "Cluster mode",
        description="create: build a cluster for this run and delete it at the end. existing: run "
        "on the cluster named above and leave it as it is.",
    )
    keep_cluster: bool = CLOUD.setting(
        False,
        "Keep cluster",
        description="Keep the cluster this run created instead of deleting it (its TPUs go on "
        "billing until you delete it).",
    )
    capacity: Capacity = ESSENTIALS.choice(
        Capacity,
        "TPU capacity",
        description="How the run gets its TPUs. reservation: your reserved TPUs (the tutorial's). "
        "calendar: a future reservation in calendar mode (named in reservation): the run waits for "
        "its start and stops at a checkpoint before its end. flex_start: Dynamic Workload "
        "Scheduler, TPUs when available (each node at most 7 days), billed while in use. spot: "
        "cheaper, preemptible Spot TPUs. With cluster mode existing: what that cluster's TPU pool "
        "is.",
    )
    reservation: str = ESSENTIALS.setting(
        "",
        "Reservation",
        description="Name of your TPU v6e reservation (tutorial: RESERVATION). Needed to create a "
        "cluster with reservation capacity; with calendar, the future reservation's name. Leave "
        "empty for flex_start and spot.",
        may_be_empty=True,
        text=rule.RESERVATION,
    )
    capacity_ladder: str = CLOUD.setting(
        "",
        "Capacity ladder",
        description="Where to get the TPUs when the first choice has none: rungs mode@zone tried "
        "in order, e.g. 'reservation@us-east5-b, flex_start@us-east5-b, spot@us-east5-a' (modes as "
        "in TPU capacity, zones of the region). The first rung must be the capacity and zone "
        "above. A rung that cannot give the whole slice (a stockout, an exhausted reservation) is "
        "released and the next one tried. Empty: capacity in zone only.",
        may_be_empty=True,
        text=rule.LADDER,
    )
    authorized_cidr: str = CLOUD.setting(
        "0.0.0.0/0",
        "Authorized CIDR",
        description="Addresses allowed to reach the cluster's control plane, as a CIDR block (the "
        "tutorial allows any: 0.0.0.0/0).",
        text=rule.CIDR,
    )
    cluster_toolkit_version: str = CLOUD.setting(
        "v1.103.0",
        "Cluster Toolkit version",
        description="Cluster Toolkit (gcluster) release that builds and deletes the cluster "
        "(tutorial: CLUSTER_TOOLKIT_VERSION).",
        text=rule.VERSION,
    )
    compute_type: str = CLOUD.setting(
        "ct6e-standard-4t",
        "Compute type",
        description="Machine type of each TPU VM (tutorial: COMPUTE_TYPE).",
        text=rule.GCE,
    )
    tpu_type: str = CLOUD.setting(
        "v6e-32",
        "TPU type",
        description="TPU slice type: generation and chip count (tutorial: TPU_TYPE).",
        text=rule.GCE,
    )
    topology: str = CLOUD.setting(
        "4x8",
        "Topology",
        description="Chip layout of one slice; must match the TPU type (tutorial: TOPOLOGY).",
        text=rule.TOPOLOGY,
    )
    cluster_nodepool_count: int = CLOUD.setting(
        1,
        "Slices",
        description="How many TPU slices (one node pool each) the cluster gets (tutorial: "
        "CLUSTER_NODEPOOL_COUNT; MaxText's num_slices).",
        bounds=(1, 64),
    )
    num_trainer_slices: int = CLOUD.setting(
        -1,
        "Trainer slices",
        description="-1: one slice, its chips split by the trainer and sampler fractions. "
        "Trainer and sampler slices are refused: MaxText 0.2.4 builds no mesh on them (its "
        "RLConfig sets num_slices -1 whenever they are given, configs/types.py:4653). MaxText "
        "flag num_trainer_slices (given when not -1).",
        bounds=(-1, 64),
    )
    num_samplers_slices: int = CLOUD.setting(
        -1,
        "Sampler slices",
        description="-1: one slice. Sampler slices are refused with MaxText 0.2.4 (see "
        "num_trainer_slices). MaxText flag num_samplers_slices (given when not -1).",
        bounds=(-1, 64),
    )
    namespace: str = CLOUD.setting(
        "default",
        "Namespace",
        description="Kubernetes namespace the run's jobs and secrets go in.",
        text=rule.DNS_LABEL,
    )
    kueue_queue: str = CLOUD.setting(
        "user-queue",
        "Kueue queue",
        description="Kueue LocalQueue the TPU jobs wait in (the tutorial's cluster has "
        "user-queue); empty: the jobs do not use Kueue.",
        may_be_empty=True,
        text=rule.DNS_LABEL,
    )
    client_service_account: str = CLOUD.setting(
        "",
        "Storage service account",
        description="Kubernetes service account for the conversion, training and export pods, "
        "bound by Workload Identity to a Google service account that can use the bucket (the "
        "tutorial's cluster has workload-identity-k8s-sa). Empty: the pods use the TPU nodes' own "
        "service account, as the tutorial does.",
        may_be_empty=True,
        text=rule.DNS_SUBDOMAIN,
    )
    # Model and images
    model_name: str = ESSENTIALS.setting(
        "gemma4-26b",
        "MaxText model",
        description="MaxText's name of the model to train; must be the model below (tutorial: "
        "MODEL_NAME). A catalogue model (README: Models and TPUs) fills the settings a run leaves "
        "unset from its cell on tpu_type: the Hugging Face model, tokenizer, TPU shape and "
        "meshes.",
        text=rule.MODEL_NAME,
    )
    hf_model_path: str = ESSENTIALS.setting(
        TUTORIAL_MODEL,
        "Hugging Face model",
        description="Hugging Face repository of the model to start from; you must have accepted "
        "its licence on Hugging Face.",
        text=rule.HF_REPO_ID,
    )
    hf_revision: str = MODEL.setting(
        "main",
        "Hugging Face revision",
        description="Branch, tag or commit of that repository to convert; a commit pins the exact "
        "weights. A converted copy is kept per model, revision and scan layers, and reused.",
        text=rule.HF_REVISION,
    )
    tokenizer_path: str = ESSENTIALS.setting(
        TUTORIAL_MODEL,
        "Tokenizer",
        description="Tokenizer used in training; normally the same repository as the model.",
        maxtext=True,
        text=rule.HF_REPO_ID,
    )
    chat_template_path: str = MODEL.setting(
        "",
        "Tokenizer chat template",
        description="Chat template file inside the MaxText image for a tokenizer that has none "
        "(a base model's); the catalogue's model sets it, and none for a tokenizer with its own. "
        "MaxText flag chat_template_path (given when set).",
        may_be_empty=True,
        text=rule.FREE_TEXT,
    )
    cloud_image_name: str = MODEL.image(
        TUTORIAL_IMAGE,
        "MaxText image",
        description="Container image with MaxText that runs conversion, training and export "
        "(tutorial: CLOUD_IMAGE_NAME).",
    )
    pathways_server_image: str = MODEL.image(
        PATHWAYS_SERVER_IMAGE,
        "Pathways server image",
        description="Pathways server and worker image (the one MaxText 0.2.4 pins).",
    )
    pathways_proxy_server_image: str = MODEL.image(
        PATHWAYS_PROXY_SERVER_IMAGE,
        "Pathways proxy image",
        description="Pathways proxy server image (the one MaxText 0.2.4 pins).",
    )
    allow_unpinned_images: bool = MODEL.setting(
        False,
        "Allow unpinned images",
        description="Accept images tagged latest; a scheduled run then gets whatever was pushed "
        "last.",
    )
    optimizer: Optimizer = MODEL.choice(
        Optimizer,
        "Optimizer",
        description="adafactor: the tutorial's memory-saving patch of MaxText's optimizer. adamw: "
        "MaxText's AdamW, unchanged.",
    )
    weight_dtype: DType = MODEL.setting(
        DType.BFLOAT16,
        "Weight dtype",
        description="Number format of the weights in the rollouts and in the exported model.",
        choices=DType,
    )
    scan_layers: bool = MODEL.setting(
        False,
        "Scan layers",
        description="Store the model's layers as one stacked layer (faster to compile; a different "
        "checkpoint layout), in conversion, training and export.",
    )
    # MaxText GRPO flags (dots as underscores): declared in train_rl's flag order, the tutorial's
    # (tpu_rl.jobs.maxtext_flags)
    data_template_path: str = GRPO.maxtext(
        "maxtext/examples/chat_templates/openmathinstruct2_rl.json",
        "Chat template",
        description="Chat template that turns each dataset problem into a prompt, inside the "
        "MaxText image.",
        text=rule.FREE_TEXT,
    )
    num_batches: int = ESSENTIALS.maxtext(
        50,
        "Training steps",
        description="How long training runs: the number of training steps, one batch of prompts "
        "each.",
        bounds=(1, 10_000_000),
    )
    batch_size: int = GRPO.maxtext(
        4, "Batch size", description="Prompts per training step.", bounds=(1, 65_536)
    )
    train_micro_batch_size: int = GRPO.maxtext(
        2,
        "Micro batch size",
        description="Prompts per forward and backward pass; a step accumulates batch_size / this "
        "many passes.",
        bounds=(1, 65_536),
    )
    max_target_length: int = GRPO.maxtext(
        640,
        "Max target length",
        description="Longest sequence in tokens, prompt and answer together.",
        bounds=LENGTH,
    )
    max_prefill_predict_length: int = GRPO.maxtext(
        256, "Max prefill length", description="Longest prompt in tokens.", bounds=LENGTH
    )
    mu_dtype: DType = GRPO.maxtext(
        DType.BFLOAT16,
        "mu dtype",
        description="Number format of the optimizer's running average of gradients.",
        choices=DType,
    )
    grad_dtype: DType = GRPO.maxtext(
        DType.BFLOAT16, "grad dtype", description="Number format of the gradients.", choices=DType
    )
    rollout_tensor_parallelism: int = GRPO.maxtext(
        4,
        "Rollout TP",
        description="Chips each rollout model copy is split across (tensor parallelism in vLLM).",
        bounds=COUNT,
    )
    rollout_expert_parallelism: int = GRPO.maxtext(
        1,
        "Rollout EP",
        description="Chips the rollout model's experts are spread across (expert parallelism in "
        "vLLM).",
        bounds=COUNT,
    )
    trainer_devices_fraction: float = GRPO.maxtext(
        0.5, "Trainer fraction", description="Share of the slice's chips that train the model."
    )
    sampler_devices_fraction: float = GRPO.maxtext(
        0.5,
        "Sampler fraction",
        description="Share of the slice's chips that generate answers (the vLLM sampler).",
    )
    ici_tensor_parallelism: int = GRPO.maxtext(
        2,
        "ICI TP",
        description="Trainer chips each layer's matrices are split across (tensor parallelism).",
        bounds=AXIS,
    )
    ici_expert_parallelism: int = GRPO.maxtext(
        4,
        "ICI EP",
        description="Trainer chips the experts are spread across (expert parallelism).",
        bounds=AXIS,
    )
    ici_fsdp_parallelism: int = GRPO.maxtext(
        -1,
        "ICI FSDP",
        description="Trainer chips the weights are sharded across (FSDP); -1: all the trainer's "
        "chips the other two leave.",
        bounds=AXIS,
    )
    hbm_utilization_vllm: float = GRPO.maxtext(
        0.7,
        "vLLM HBM share",
        description="Share of each sampler chip's memory vLLM may use for weights and its cache.",
    )
    remat_policy: RematPolicy = GRPO.maxtext(
        RematPolicy.FULL,
        "Remat policy",
        description="What training recomputes instead of keeping in memory; full: everything "
        "(least memory, slowest).",
        choices=RematPolicy,
    )
    async_scheduling: bool = GRPO.maxtext(
        False,
        "Async scheduling",
        description="Let vLLM schedule the next batch while the current one runs.",
    )
    allow_split_physical_axes: bool = GRPO.maxtext(
        True,
        "Split physical axes",
        description="Allow a parallelism axis to span parts of several physical chip axes.",
    )
    ragged_gather_reduce_fallback: bool = GRPO.maxtext(
        True,
        "Ragged gather fallback",
        description="Use the slower, safe path for the experts' uneven gathers and reductions.",
    )
    enable_dp_attention: bool = GRPO.maxtext(
        False,
        "DP attention",
        description="Split attention across the sampler's chips by batch (data-parallel attention "
        "in vLLM).",
    )
    decode_sampling_temperature: float = GRPO.maxtext(
        0.8,
        "Sampling temperature",
        description="How varied the generated answers are: higher is more varied.",
    )
    decode_sampling_top_k: int = GRPO.maxtext(
        50,
        "Sampling top-k",
        description="Each generated token is picked among this many most likely ones.",
        bounds=(1, 1_000_000),
    )
    decode_sampling_nucleus_p: float = GRPO.maxtext(
        0.95,
        "Sampling top-p",
        description="Each generated token is picked among the most likely ones whose probabilities "
        "add up to this.",
    )
    learning_rate: float = GRPO.maxtext(
        2e-5,
        "Learning rate",
        description="How far each step moves the weights (the peak learning rate).",
    )
    learning_rate_schedule_steps: int = GRPO.maxtext(
        100,
        "LR schedule steps",
        description="Steps over which the learning rate warms up and decays.",
        bounds=(1, 100_000_000),
    )
    # rl.yml's 50 leaves no checkpoint to resume from
    checkpoint_period: int = GRPO.maxtext(
        25,
        "Checkpoint period",
        description="Steps between checkpoints: a resume after lost TPUs redoes at most this many. "
        "Below the number of batches while training resumes are allowed.",
        bounds=(1, 10_000_000),
    )
    rl_num_generations: int = GRPO.setting(  # group_size asks for at least 2
        4,
        "Generations per prompt",
        description="Answers generated per prompt and compared with each other (GRPO's group size, "
        "at least 2).",
        bounds=COUNT,
        maxtext="rl.num_generations",
    )
    rl_reshard_chunk_size: int = GRPO.setting(
        4,
        "Reshard chunk",
        description="How many weight chunks are copied at a time from the trainer to the sampler.",
        bounds=COUNT,
        maxtext="rl.reshard_chunk_size",
    )
    debug: bool = GRPO.maxtext(
        True, "Debug", description="MaxText's debug output in the training log."
    )
    vllm_hf_overrides: str = GRPO.maxtext(
        '{"architectures": ["MaxTextForCausalLM"]}',
        "vLLM HF overrides",
        description="JSON object that overrides the model's Hugging Face configuration in vLLM.",
        text=rule.JSON_TEXT,
    )
    rollout_model_impl: ModelImpl = GRPO.choice(
        ModelImpl,
        "Rollout model code",
        description="Which model code the rollout's vLLM runs (tpu-inference's MODEL_IMPL_TYPE, "
        "set in the training pod): auto chooses by architecture; flax_nnx its JAX models "
        "(run_gptoss_20b_rl.sh's for gpt-oss); vllm vLLM's own. With vllm_hf_overrides naming "
        "MaxTextForCausalLM, MaxText's model runs whatever this says.",
    )
    extra_train_args: list[str] = GRPO.setting(
        [],
        "Extra training flags",
        description="More MaxText flags for training, one key=value per item (not the ones set "
        "above).",
        may_be_empty=True,
        text=rule.FREE_TEXT,
    )
    # Run control
    backend_restarts: int = RUN.setting(
        0,
        "Backend restarts",
        description="How often the Pathways backend may restart after a failure (JobSet "
        "maxRestarts).",
        bounds=(0, 1000),
    )
    max_training_restarts: int = RUN.setting(
        2,
        "Training resumes",
        description="How many times training resumes from its newest checkpoint after losing its "
        "TPUs (preemption, flex-start reclaim); 0: the run fails instead.",
        bounds=(0, 100),
    )
    max_spend_usd: float = RUN.setting(
        0.0,
        "Spend limit (USD)",
        description="Most the training's TPUs may cost, in US dollars; 0: no limit. Validate "
        "refuses a run whose estimate passes it; while training, each committed checkpoint is "
        "judged on the spend projected at the end then: when it passes the limit, training "
        "stops right after that checkpoint, and spend_limit_action says what follows. Spot and "
        "flex-start count the slice's hours at the price table's price; a calendar window "
        "counts its whole length; a reservation has no spend of its own (its commitment pays).",
        at_least=0,
    )
    spend_limit_action: SpendLimitAction = RUN.choice(
        SpendLimitAction,
        "At the spend limit",
        description="What a run stopped by max_spend_usd does with the checkpoint it stopped at: "
        "export (export and gate it) or fail (the run fails, nothing exported).",
    )
    negotiated_usd_per_chip_hour: float = RUN.setting(
        0.0,
        "Negotiated price (USD)",
        description="Your contract's price of a TPU chip-hour in the run's capacity mode (a "
        "commitment's, or TPU7x's, which has no public price), in US dollars; 0: the price "
        "table's (tpu_rl/prices.py). The estimate, the spend limit and the run report "
        "count the run's TPUs at it.",
        at_least=0,
    )
    health_nonfinite_loss: bool = RUN.setting(
        True,
        "Stop on a NaN loss",
        description="Training health watchdog: stop training at the first Train step line whose "
        "loss or perplexity is nan or inf, or Intermediate Eval line whose mean_reward is (then "
        "health_action). A step line's anomaly step is the step before it: Tunix logs a step's "
        "loss an update late, computed with the weights the step before saved.",
    )
    health_spike_factor: float = RUN.setting(
        10.0,
        "Loss spike factor",
        description="Training health watchdog: stop training when a step's loss magnitude passes "
        "this many times the median of the last health_spike_window finite losses and "
        "health_spike_floor (then health_action); 0: off.",
        at_least=0,
    )
    health_spike_floor: float = RUN.setting(
        10.0,
        "Loss spike floor",
        description="The smallest loss magnitude the loss spike rule calls a spike: GRPO's loss "
        "is beta times the KL plus a term that averages to zero, so it sits near zero and "
        "changes sign (real runs stay within 0.36); a diverged policy logs thousands.",
        at_least=0,
    )
    health_spike_window: int = RUN.setting(
        20,
        "Loss spike window (steps)",
        description="How many of the latest finite losses the loss spike rule takes the median "
        "of; the rule waits until half of them are known.",
        bounds=(2, 1000),
    )
    health_stall_factor: float = RUN.setting(
        5.0,
        "Stall factor",
        description="Training health watchdog: stop training when no new Train step line comes "
        "for this many times the median step interval (at least health_stall_floor_minutes) "
        "while the training pod runs (then health_action); 0: off.",
        at_least=0,
    )
    health_stall_floor_minutes: float = RUN.setting(
        30.0,
        "Stall floor (min)",
        description="The shortest silence the stall rule calls a stall, in minutes: a checkpoint "
        "save or an evaluation may take this long between two step lines.",
        at_least=0,
    )
    health_reward_drop: float = RUN.setting(
        1.0,
        "Reward collapse drop",
        description="Training health watchdog: stop training when an Intermediate Eval's "
        "mean_reward falls below the best one so far by more than this, in reward units (then "
        "health_action); 0: off.",
        at_least=0,
    )
    health_slow_factor: float = RUN.setting(
        3.0,
        "Slow step factor",
        description="Training health watchdog: warn in the task log when a step takes more than "
        "this many times the median step interval (a warning only); 0: off.",
        at_least=0,
    )
    health_kl_factor: float = RUN.setting(
        10.0,
        "KL blow-up factor",
        description="Training health watchdog, from the run's TensorBoard event files (read up "
        "to log_period steps late: Tunix flushes them every log_period steps, MaxText's 20): stop "
        "training when actor/train/kl passes this many times the median of its last 20 values "
        "and health_kl_floor while the batch's mean reward is below the recent median (a policy "
        "that learns moves away from the reference too; then health_action); 0: off.",
        at_least=0,
    )
    health_kl_floor: float = RUN.setting(
        0.1,
        "KL blow-up floor",
        description="The smallest actor/train/kl the KL blow-up rule calls a blow-up: early in "
        "training the KL is near 0, so any value is many times its median.",
        at_least=0,
    )
    health_reward_spread_steps: int = RUN.setting(
        20,
        "Reward std collapse (steps)",
        description="Training health watchdog, from the run's TensorBoard event files (read up "
        "to log_period steps late): stop training when this many steps in a row give every "
        "completion of the batch the same reward, below the best batch reward before them "
        "(rewards/train/score max = min: GRPO's advantages are all 0, the policy collapsed; the "
        "same reward at or above the best is a learned task, not a fault; then health_action); "
        "0: off.",
        bounds=(0, 100000),
    )
    health_action: HealthAction = RUN.choice(
        HealthAction,
        "When the watchdog stops training",
        description="What follows when a watchdog rule stops training (its Job and backend are "
        "deleted at once; a checkpoint saved at or after the anomaly step is never gated, "
        "exported or promoted): stop (the run fails, naming the rule, the step, the evidence "
        "and the newest healthy checkpoint), export_healthy (gate and export the newest "
        "checkpoint committed before the anomaly, gated on its evaluation or the newest one "
        "before it) or resume (once: the saves at or after the anomaly step are moved to the "
        "run's quarantine/ folder and training resumes on the same slice from the newest "
        "healthy checkpoint, or starts over from the converted checkpoint when none is healthy, "
        "the watchdog afresh; a second anomaly ends the run as stop does).",
    )
    min_reward_gain: float = RUN.setting(
        0.0,
        "Minimum reward gain",
        description="The model is exported only if its mean reward after training is at least the "
        "one before plus this.",
    )
    gate_metrics: dict[str, float] = RUN.setting(
        {},
        "Gate metrics",
        description='Minimum gain per metric for the model to be exported, e.g. {"mean_reward": '
        '0.01, "accuracy": 0, "format_accuracy": -5}: a negative number is the largest loss '
        "allowed; accuracies in percentage points. Metrics: accuracy, partial_accuracy, "
        "format_accuracy, mean_reward. Empty: mean_reward must gain min_reward_gain. The exported "
        "step's evaluation is compared with the base model's.",
        may_be_empty=True,
    )
    export_checkpoint: ExportCheckpoint = RUN.choice(
        ExportCheckpoint,
        "Exported checkpoint",
        description="Which committed checkpoint to export: last (the newest) or best (the one "
        "whose evaluation ranks first on best_metric, ties to the later step; the last step's "
        "evaluation is the Post line). Default last: with checkpoint_period 25 and MaxText's "
        "eval_interval 10 only the last step has both a checkpoint and an evaluation, so best "
        "would export the same step. For best, make checkpoint_period a multiple of eval_interval "
        "(extra_train_args eval_interval=N).",
    )
    best_metric: EvalMetric = RUN.choice(
        EvalMetric,
        "Best checkpoint metric",
        description="The evaluation metric export_checkpoint=best ranks the steps by.",
    )
    min_gain_over_champion: dict[str, float] = RUN.setting(
        {"mean_reward": 0.0},
        "Minimum gain over the champion",
        description="Metric -> gain the export must have over the deployment's current champion, "
        "both scored on this run's evaluation set (a negative gain: the loss allowed); an export "
        "that falls short is kept but not promoted.",
    )
    poll_interval_seconds: int = RUN.setting(
        30,
        "Poll interval (s)",
        description="How often the run asks the cluster how its jobs are doing.",
        bounds=(1, 3600),
    )
    progress_report_minutes: float = RUN.setting(
        15.0,
        "Progress report (min)",
        description="How often, in minutes of training, the run's page and note show its step, "
        "ETA and spend while it trains, or every 10% of the steps, whichever comes first (the "
        "first once the pace is known); each report resumes the waiting task in a worker for a "
        "few seconds. The task log says it more often.",
        at_least=0,
    )
    pending_timeout_minutes: int = RUN.setting(
        60,
        "Pending timeout (min)",
        description="How long pods may wait for TPUs or for Kueue before the run fails.",
        bounds=(1, 7 * DAY),
    )
    rung_wait_seconds: int = RUN.setting(
        900,
        "Rung wait (s)",
        description="With a capacity ladder: how long a rung that has another after it may take to "
        "give the whole slice before the run moves on (at most the pending timeout; the last rung "
        "waits the pending timeout).",
        bounds=(1, 7 * DAY * 60),
    )
    cluster_timeout_minutes: int = RUN.limit(
        90, "Cluster", DAY, description="Time limit for building or deleting the cluster."
    )
    conversion_timeout_minutes: int = RUN.limit(
        180,
        "Conversion",
        7 * DAY,
        description="Time limit for converting the Hugging Face model to MaxText.",
    )
    training_timeout_minutes: int = RUN.limit(
        720, "Training", 30 * DAY, description="Time limit for training, waits for TPUs included."
    )
    export_timeout_minutes: int = RUN.limit(
        180,
        "Export",
        7 * DAY,
        description="Time limit for exporting the trained model to Hugging Face format.",
    )
    approval: Approval = RUN.choice(
        Approval,
        "Approval",
        description="required: a person approves the verified export (Airflow's Required Actions) "
        "before it becomes the deployment's champion, after the TPUs and cluster are released; "
        "none: it is promoted without asking.",
    )
    hold_length_drift: float = RUN.setting(
        2.0,
        "Hold on completion length drift",
        description="Reward hacking hold: when the batch reward rose while the mean completion "
        "length (TensorBoard completions/train/mean_length) moved past this many times its start, "
        "longer or shorter, promotion waits for a person's approval with that evidence, even with "
        "approval=none (the real Tunix GRPO runs of sandbox/corpus move it 0.98 to 1.44 "
        "times); 0: off.",
        at_least=0,
    )
    approval_timeout_minutes: int = RUN.limit(
        DAY,
        "Approval",
        30 * DAY,
        description="How long the approval waits for an answer; no answer by then answers "
        "approval_timeout_answer (by default: rejects; the export stays where it is).",
    )
    approval_timeout_answer: ApprovalTimeoutAnswer = RUN.choice(
        ApprovalTimeoutAnswer,
        "Answer when the approval times out",
        description="What an approval no one answered within approval_timeout_minutes answers: "
        "reject (the export stays, unpromoted) or approve (it is promoted as if a person "
        "approved). Airflow's approval form highlights the same option: it is one parameter there "
        "(the operator's defaults).",
    )
    heldout_tasks: list[str] = RUN.setting(
        [],
        "Held-out benchmarks",
        description="lm-eval task names MaxText's evaluator (maxtext.eval, runner lm_eval) scores "
        "on the slice after training, e.g. gsm8k (GSM8K's 1,319 test items): the top "
        "heldout_top_k steps, the base model and the champion on the same items, item by item. "
        "The export is the step that scores best; the gate stops a significant loss against "
        "the base model, and promotion needs a significant gain over the champion (over the base "
        "model on a deployment's first run). Empty: off (the trainer's own evaluation decides).",
        may_be_empty=True,
        text=rule.FREE_TEXT,
    )
    heldout_guard_tasks: list[str] = RUN.setting(
        [],
        "Held-out guard benchmarks",
        description="lm-eval task names of capabilities the reward never scores, scored beside "
        "heldout_tasks (e.g. arc_easy, grade-school science by multiple choice): one the "
        "candidate answers significantly worse than the base model holds promotion for a "
        "person (a sign of reward hacking).",
        may_be_empty=True,
        text=rule.FREE_TEXT,
    )
    heldout_top_k: int = RUN.setting(
        2,
        "Held-out steps scored",
        description="How many committed steps the held-out evaluation scores: the best by "
        "best_metric's trainer evaluation, then the newest.",
        bounds=(1, 10),
    )
    heldout_significance: float = RUN.setting(
        0.05,
        "Held-out significance level",
        description="The paired verdict's level (McNemar's exact test): a gain or a loss counts "
        "only when its p-value is below it; otherwise the candidate is not distinguishable.",
        at_least=0,
    )
    heldout_num_samples: int = RUN.setting(
        0,
        "Held-out items per benchmark",
        description="maxtext.eval's --num_samples: the first N items of each benchmark; 0: all.",
        bounds=(0, 1_000_000),
    )
    heldout_timeout_minutes: int = RUN.limit(
        30,
        "Held-out evaluation per model",
        7 * DAY,
        description="Time limit for scoring one model on the held-out benchmarks (the step's "
        "limit: this times the models scored).",
    )
    champion_eval_timeout_minutes: int = RUN.limit(
        60,
        "Champion evaluation",
        7 * DAY,
        description="Time limit for scoring the deployment's champion on this run's evaluation "
        "set, before the TPUs are released.",
    )

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
        return chips_in(self.topology)

    @property
    def slices(self) -> Slice:
        """The run's TPU slices: cluster_nodepool_count slices of its TPU type and topology."""
        return Slice.of(self.tpu_type, self.topology, self.cluster_nodepool_count)


SETTING_FIELDS: dict[str, dataclasses.Field[Any]] = {
    f.name: f for f in dataclasses.fields(RunSettings)
}
CHOICE_FIELDS = tuple(f for f in SETTING_FIELDS.values() if f.metadata["choices"])
REQUIRED_SETTINGS = tuple(name for name, f in SETTING_FIELDS.items() if f.metadata["required"])
# May be left empty: an emptied field (the trigger form sends null) reads as empty, not as the
# default.
OPTIONAL_SETTINGS = tuple(name for name, f in SETTING_FIELDS.items() if f.metadata["may_be_empty"])
