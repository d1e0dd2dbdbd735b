"""What each setting does, in a user's words: the trigger form's and docs/settings.md's text.

One entry per setting of tpu_rl.settings.fields (a test keeps the keys the same). Plain text:
Airflow's form shows a Param's `description` as text, not Markdown (so no backticks). A setting
that becomes a MaxText flag gets the flag's name after its text (metadata.describe); a name in
capitals is the tutorial's environment variable.
"""

from __future__ import annotations

DESCRIPTIONS: dict[str, str] = {
    # Google Cloud and the cluster
    "project": "Your Google Cloud project ID (tutorial: PROJECT).",
    "region": "Region of your TPU capacity and of the cluster, e.g. us-east5 (tutorial: REGION).",
    "zone": "Zone of your TPU capacity, inside the region, e.g. us-east5-b (tutorial: ZONE).",
    "cluster_name": "Name of the GKE cluster the run creates or uses: lower-case letters, digits "
    "and hyphens, at most 20 characters (tutorial: CLUSTER_NAME).",
    "gcs_bucket": "Cloud Storage bucket (name only, no gs://) for checkpoints, the exported "
    "model and the cluster's Terraform state (tutorial: GCS_BUCKET).",
    "cluster_mode": "create: build a cluster for this run and delete it at the end. existing: "
    "run on the cluster named above and leave it as it is.",
    "keep_cluster": "Keep the cluster this run created instead of deleting it (its TPUs go on "
    "billing until you delete it).",
    "capacity": "How the run gets its TPUs. reservation: your reserved TPUs (the tutorial's). "
    "calendar: a future reservation in calendar mode (named in reservation): the run waits for its "
    "start and stops at a checkpoint before its end. flex_start: Dynamic Workload Scheduler, "
    "TPUs when available (each node at most 7 days), billed while in use. spot: "
    "cheaper, preemptible Spot TPUs. With cluster mode existing: what that cluster's TPU pool is.",
    "reservation": "Name of your TPU v6e reservation (tutorial: RESERVATION). Needed to create a "
    "cluster with reservation capacity; with calendar, the future reservation's name. Leave empty "
    "for flex_start and spot.",
    "capacity_ladder": "Where to get the TPUs when the first choice has none: rungs mode@zone "
    "tried in order, e.g. 'reservation@us-east5-b, flex_start@us-east5-b, spot@us-east5-a' "
    "(modes as in TPU capacity, zones of the region). The first rung must be the capacity and "
    "zone above. A rung that cannot give the whole slice (a stockout, an exhausted reservation) "
    "is released and the next one tried. Empty: capacity in zone only.",
    "authorized_cidr": "Addresses allowed to reach the cluster's control plane, as a CIDR block "
    "(the tutorial allows any: 0.0.0.0/0).",
    "cluster_toolkit_version": "Cluster Toolkit (gcluster) release that builds and deletes the "
    "cluster (tutorial: CLUSTER_TOOLKIT_VERSION).",
    "compute_type": "Machine type of each TPU VM (tutorial: COMPUTE_TYPE).",
    "tpu_type": "TPU slice type: generation and chip count (tutorial: TPU_TYPE).",
    "topology": "Chip layout of one slice; must match the TPU type (tutorial: TOPOLOGY).",
    "cluster_nodepool_count": "How many TPU slices (one node pool each) the cluster gets "
    "(tutorial: CLUSTER_NODEPOOL_COUNT).",
    "namespace": "Kubernetes namespace the run's jobs and secrets go in.",
    "kueue_queue": "Kueue LocalQueue the TPU jobs wait in (the tutorial's cluster has "
    "user-queue); empty: the jobs do not use Kueue.",
    "client_service_account": "Kubernetes service account for the conversion, training and "
    "export pods, bound by Workload Identity to a Google service account that can use the "
    "bucket (the tutorial's cluster has workload-identity-k8s-sa). Empty: the pods use the TPU "
    "nodes' own service account, as the tutorial does.",
    # Model and images
    "model_name": "MaxText's name of the model to train; must be the model below "
    "(tutorial: MODEL_NAME).",
    "hf_model_path": "Hugging Face repository of the model to start from; you must have "
    "accepted its licence on Hugging Face.",
    "hf_revision": "Branch, tag or commit of that repository to convert; a commit pins the "
    "exact weights. A converted copy is kept per model, revision and scan layers, and reused.",
    "tokenizer_path": "Tokenizer used in training; normally the same repository as the model.",
    "cloud_image_name": "Container image with MaxText that runs conversion, training and "
    "export (tutorial: CLOUD_IMAGE_NAME).",
    "pathways_server_image": "Pathways server and worker image (the one MaxText 0.2.4 pins).",
    "pathways_proxy_server_image": "Pathways proxy server image (the one MaxText 0.2.4 pins).",
    "allow_unpinned_images": "Accept images tagged latest; a scheduled run then gets whatever "
    "was pushed last.",
    "optimizer": "adafactor: the tutorial's memory-saving patch of MaxText's optimizer. adamw: "
    "MaxText's AdamW, unchanged.",
    "weight_dtype": "Number format of the weights in the rollouts and in the exported model.",
    "scan_layers": "Store the model's layers as one stacked layer (faster to compile; a "
    "different checkpoint layout), in conversion, training and export.",
    # GRPO
    "data_template_path": "Chat template that turns each dataset problem into a prompt, inside "
    "the MaxText image.",
    "num_batches": "How long training runs: the number of training steps, one batch of prompts "
    "each.",
    "batch_size": "Prompts per training step.",
    "train_micro_batch_size": "Prompts per forward and backward pass; a step accumulates "
    "batch_size / this many passes.",
    "max_target_length": "Longest sequence in tokens, prompt and answer together.",
    "max_prefill_predict_length": "Longest prompt in tokens.",
    "mu_dtype": "Number format of the optimizer's running average of gradients.",
    "grad_dtype": "Number format of the gradients.",
    "rollout_tensor_parallelism": "Chips each rollout model copy is split across (tensor "
    "parallelism in vLLM).",
    "rollout_expert_parallelism": "Chips the rollout model's experts are spread across "
    "(expert parallelism in vLLM).",
    "trainer_devices_fraction": "Share of the slice's chips that train the model.",
    "sampler_devices_fraction": "Share of the slice's chips that generate answers (the vLLM "
    "sampler).",
    "ici_tensor_parallelism": "Trainer chips each layer's matrices are split across (tensor "
    "parallelism).",
    "ici_expert_parallelism": "Trainer chips the experts are spread across (expert parallelism).",
    "ici_fsdp_parallelism": "Trainer chips the weights are sharded across (FSDP); -1: all the "
    "trainer's chips the other two leave.",
    "hbm_utilization_vllm": "Share of each sampler chip's memory vLLM may use for weights and "
    "its cache.",
    "remat_policy": "What training recomputes instead of keeping in memory; full: everything "
    "(least memory, slowest).",
    "async_scheduling": "Let vLLM schedule the next batch while the current one runs.",
    "allow_split_physical_axes": "Allow a parallelism axis to span parts of several physical "
    "chip axes.",
    "ragged_gather_reduce_fallback": "Use the slower, safe path for the experts' uneven "
    "gathers and reductions.",
    "enable_dp_attention": "Split attention across the sampler's chips by batch (data-parallel "
    "attention in vLLM).",
    "decode_sampling_temperature": "How varied the generated answers are: higher is more varied.",
    "decode_sampling_top_k": "Each generated token is picked among this many most likely ones.",
    "decode_sampling_nucleus_p": "Each generated token is picked among the most likely ones "
    "whose probabilities add up to this.",
    "learning_rate": "How far each step moves the weights (the peak learning rate).",
    "learning_rate_schedule_steps": "Steps over which the learning rate warms up and decays.",
    "checkpoint_period": "Steps between checkpoints: a resume after lost TPUs redoes at most "
    "this many. Below the number of batches while training resumes are allowed.",
    "rl_num_generations": "Answers generated per prompt and compared with each other (GRPO's "
    "group size, at least 2).",
    "rl_reshard_chunk_size": "How many weight chunks are copied at a time from the trainer to "
    "the sampler.",
    "debug": "MaxText's debug output in the training log.",
    "vllm_hf_overrides": "JSON object that overrides the model's Hugging Face configuration "
    "in vLLM.",
    "extra_train_args": "More MaxText flags for training, one key=value per item (not the "
    "ones set above).",
    # Run control
    "backend_restarts": "How often the Pathways backend may restart after a failure "
    "(JobSet maxRestarts).",
    "max_training_restarts": "How many times training resumes from its newest checkpoint after "
    "losing its TPUs (preemption, flex-start reclaim); 0: the run fails instead.",
    "min_reward_gain": "The model is exported only if its mean reward after training is at "
    "least the one before plus this.",
    "gate_metrics": "Minimum gain per metric for the model to be exported, e.g. "
    '{"mean_reward": 0.01, "accuracy": 0, "format_accuracy": -5}: a negative number is the '
    "largest loss allowed; accuracies in percentage points. Metrics: accuracy, "
    "partial_accuracy, format_accuracy, mean_reward. Empty: mean_reward must gain "
    "min_reward_gain. The exported step's evaluation is compared with the base model's.",
    "export_checkpoint": "Which committed checkpoint to export: last (the newest) or best "
    "(the one whose evaluation ranks first on best_metric, ties to the later step; the last "
    "step's evaluation is the Post line). Default last: with checkpoint_period 25 and "
    "MaxText's eval_interval 10 only the last step has both a checkpoint and an evaluation, "
    "so best would export the same step. For best, make checkpoint_period a multiple of "
    "eval_interval (extra_train_args eval_interval=N).",
    "best_metric": "The evaluation metric export_checkpoint=best ranks the steps by.",
    "min_gain_over_champion": "Metric -> gain the export must have over the deployment's "
    "current champion, both scored on this run's evaluation set (a negative gain: the loss "
    "allowed); an export that falls short is kept but not promoted.",
    "poll_interval_seconds": "How often the run asks the cluster how its jobs are doing.",
    "pending_timeout_minutes": "How long pods may wait for TPUs or for Kueue before the run fails.",
    "rung_wait_seconds": "With a capacity ladder: how long a rung that has another after it may "
    "take to give the whole slice before the run moves on (at most the pending timeout; the last "
    "rung waits the pending timeout).",
    "cluster_timeout_minutes": "Time limit for building or deleting the cluster.",
    "conversion_timeout_minutes": "Time limit for converting the Hugging Face model to MaxText.",
    "training_timeout_minutes": "Time limit for training, waits for TPUs included.",
    "export_timeout_minutes": "Time limit for exporting the trained model to Hugging Face format.",
    "approval": "required: a person approves the verified export (Airflow's Required Actions) "
    "before it becomes the deployment's champion, after the TPUs and cluster are released; "
    "none: it is promoted without asking.",
    "approval_timeout_minutes": "How long the approval waits for an answer; no answer by then "
    "answers approval_timeout_answer (by default: rejects; the export stays where it is).",
    "approval_timeout_answer": "What an approval no one answered within "
    "approval_timeout_minutes answers: reject (the export stays, unpromoted) or approve (it is "
    "promoted as if a person approved). Airflow's approval form highlights the same option: "
    "it is one parameter there (the operator's defaults).",
    "champion_eval_timeout_minutes": "Time limit for scoring the deployment's champion on this "
    "run's evaluation set, before the TPUs are released.",
}
