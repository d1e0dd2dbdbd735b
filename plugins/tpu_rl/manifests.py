"""Kubernetes objects of a run, as plain dicts: what `make plan` writes and the DAG submits."""

from __future__ import annotations

import base64
import shlex
from typing import Any

from tpu_rl.layout import JOB_NAME_PREFIX, RunLayout
from tpu_rl.tpu import ACCELERATOR_LABEL, PATHWAYS_INSTANCE_TYPE

Manifest = dict[str, Any]

CONTAINER = "maxtext"
TOKEN_KEY = "token"
TOKEN_ENV = "HF_TOKEN"
TOKEN_FLAG = f"hf_access_token=${{{TOKEN_ENV}}}"
CONVERT_MODULE = "maxtext.checkpoint_conversion.to_maxtext"
EXPORT_MODULE = "maxtext.checkpoint_conversion.to_huggingface"
TRAIN_MODULE = "maxtext.trainers.post_train.rl.train_rl"
PATHWAYS_REPO = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways"
CPU_NODE_POOL = "cpu-np"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TTL_AFTER_FINISHED = 24 * 3600
# The tutorial's environment for every Pathways container, plus keepalives that stop long
# checkpoint loads from hitting gRPC's idle disconnect.
PATHWAYS_ENV = {
    "GRPC_DNS_RESOLVER": "native",
    "FLAGS_pathways_enforce_subset_devices_form_subslice": "false",
    "GRPC_KEEPALIVE_TIME_MS": "60000",
    "GRPC_KEEPALIVE_TIMEOUT_MS": "120000",
}
OPTIMIZER_PATCH = (
    "import pathlib, re; "
    "p = pathlib.Path('/deps/src/maxtext/trainers/post_train/rl/utils_rl.py'); "
    "s, n = re.subn('optax[.]adamw[(][^)]+[)]', 'optax.adafactor(learning_rate=learning_rate)', "
    "p.read_text()); "
    "assert n, 'optimizer patch: optax.adamw(...) not found in ' + str(p); "
    "p.write_text(s)"
)


def flag(name: str, value: Any) -> str:
    """A MaxText key=value flag; floats in short form."""
    if isinstance(value, float):
        value = format(value, "g")
    return f"{name}={value}"


def _json_bool(value: bool) -> str:
    return "true" if value else "false"


def conversion_flags(layout: RunLayout) -> list[str]:
    """to_maxtext's flags, as in the tutorial."""
    s = layout.settings
    return [
        flag("model_name", s.model_name),
        TOKEN_FLAG,
        flag("--hf_model_path", s.hf_model_path),
        flag("base_output_directory", layout.maxtext_dir),
        flag("scan_layers", s.scan_layers),
        "use_multimodal=False",
        "skip_jax_distributed_system=true",
        "checkpoint_storage_use_zarr3=0",
        "checkpoint_storage_use_ocdbt=0",
        "hardware=cpu",
        "--lazy_load_tensors=True",
    ]


def export_flags(layout: RunLayout, step: int) -> list[str]:
    """to_huggingface's flags, from checkpoint `step` of this run."""
    s = layout.settings
    return [
        flag("model_name", s.model_name),
        TOKEN_FLAG,
        flag("load_parameters_path", layout.checkpoint_params(step)),
        flag("base_output_directory", layout.export_dir),
        "skip_jax_distributed_system=true",
        "hardware=cpu",
        flag("scan_layers", s.scan_layers),
        "use_multimodal=False",
        flag("weight_dtype", s.weight_dtype),
        "--override_model_architecture",
    ]


def vllm_additional_config(layout: RunLayout) -> str:
    s = layout.settings
    return (
        "{'maxtext_config': {"
        f"'model_name': '{s.model_name}', 'model_call_mode': 'inference', "
        f"'enable_dp_attention': {_json_bool(s.enable_dp_attention)}, "
        f"'allow_split_physical_axes': {_json_bool(s.allow_split_physical_axes)}, "
        "'use_ragged_sort': false, "
        f"'ragged_gather_reduce_fallback': {_json_bool(s.ragged_gather_reduce_fallback)}, "
        f"'prefuse_moe_weights': true, 'weight_dtype': '{s.weight_dtype}'}}}}"
    )


TRAIN_SETTING_FLAGS = (
    "data_template_path",
    "num_batches",
    "batch_size",
    "train_micro_batch_size",
    "max_target_length",
    "max_prefill_predict_length",
    "mu_dtype",
    "grad_dtype",
    "rollout_tensor_parallelism",
    "rollout_expert_parallelism",
    "trainer_devices_fraction",
    "sampler_devices_fraction",
    "tokenizer_path",
    "ici_tensor_parallelism",
    "ici_expert_parallelism",
    "ici_fsdp_parallelism",
    "hbm_utilization_vllm",
    "remat_policy",
    "async_scheduling",
    "allow_split_physical_axes",
    "ragged_gather_reduce_fallback",
    "enable_dp_attention",
    "decode_sampling_temperature",
    "decode_sampling_top_k",
    "decode_sampling_nucleus_p",
    "learning_rate",
    "learning_rate_schedule_steps",
)


def train_flags(layout: RunLayout) -> list[str]:
    """train_rl's flags: the tutorial's, with this run's own run_name and paths."""
    s = layout.settings
    return [
        flag("run_name", layout.slug),
        flag("base_output_directory", layout.trained_dir),
        flag("model_name", s.model_name),
        flag("scan_layers", s.scan_layers),
        flag("load_parameters_path", layout.maxtext_items),
        TOKEN_FLAG,
        *(flag(name, getattr(s, name)) for name in TRAIN_SETTING_FLAGS),
        flag("rl.num_generations", s.rl_num_generations),
        flag("rl.reshard_chunk_size", s.rl_reshard_chunk_size),
        flag("debug", s.debug),
        flag("vllm_hf_overrides", s.vllm_hf_overrides),
        flag("vllm_additional_config", vllm_additional_config(layout)),
        *s.extra_train_args,
    ]


def python_command(module: str, flags: list[str]) -> str:
    """A shell line running `python3 -m module flags`, the token read from the environment."""
    words = [
        f'hf_access_token="${{{TOKEN_ENV}}}"' if f == TOKEN_FLAG else shlex.quote(f) for f in flags
    ]
    return " ".join(["python3", "-m", module, *words])


def _env(values: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _token_env(layout: RunLayout) -> dict[str, Any]:
    return {
        "name": TOKEN_ENV,
        "valueFrom": {"secretKeyRef": {"name": layout.token_secret, "key": TOKEN_KEY}},
    }


def _metadata(layout: RunLayout, name: str, extra_labels: dict[str, str] | None = None) -> Manifest:
    return {
        "name": name,
        "namespace": layout.settings.namespace,
        "labels": {**layout.labels, **(extra_labels or {})},
        "annotations": dict(layout.annotations),
    }


def _queue_label(layout: RunLayout) -> dict[str, str]:
    return {QUEUE_LABEL: layout.settings.kueue_queue} if layout.settings.kueue_queue else {}


HOST_NETWORK = {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}


def storage_identity(layout: RunLayout) -> Manifest:
    """How a pod that reads and writes the bucket gets its Google identity.

    By default as the tutorial's head pod: on the host's network, so GKE's metadata server
    answers with the node pool's service account (cpu-np: the cluster's gke-wl-sa; TPU pool:
    gke-np-sa, given storage.admin by the blueprint edit). With `client_service_account`, the
    pod runs as that Kubernetes service account, bound to a Google one by Workload Identity
    (which does not reach host-network pods).
    """
    account = layout.settings.client_service_account
    return {"serviceAccountName": account} if account else dict(HOST_NETWORK)


def _tpu_pod_spec(
    layout: RunLayout,
    containers: list[Manifest],
    restart_policy: str,
    identity: Manifest | None = None,
) -> Manifest:
    """Pod spec on the TPU slice's hosts, as gcluster schedules them (host network unless an
    identity says otherwise)."""
    return {
        "restartPolicy": restart_policy,
        **(HOST_NETWORK if identity is None else identity),
        "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": ACCELERATOR_LABEL,
            "cloud.google.com/gke-tpu-topology": layout.settings.topology,
        },
        "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": containers,
    }


def _tpu_limits() -> Manifest:
    return {"limits": {"google.com/tpu": "4"}, "requests": {"google.com/tpu": "4"}}


def _conversion_like_job(
    layout: RunLayout, base_name: str, module: str, flags: list[str], timeout_minutes: int
) -> Manifest:
    """A Job on every host of the slice; only completion index 0 works, as in the tutorial."""
    script = f'[ "$JOB_COMPLETION_INDEX" != "0" ] || {python_command(module, flags)}'
    container = {
        "name": CONTAINER,
        "image": layout.settings.cloud_image_name,
        "command": ["bash", "-c", script],
        "env": [_token_env(layout)],
        "resources": _tpu_limits(),
    }
    hosts = layout.hosts * layout.settings.cluster_nodepool_count
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(layout, JOB_NAME_PREFIX + base_name, _queue_label(layout)),
        "spec": {
            "completionMode": "Indexed",
            "parallelism": hosts,
            "completions": hosts,
            "backoffLimit": 0,
            "activeDeadlineSeconds": timeout_minutes * 60,
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
            "template": {
                "metadata": {"labels": dict(layout.labels)},
                "spec": _tpu_pod_spec(layout, [container], "Never", storage_identity(layout)),
            },
        },
    }


def conversion_job(layout: RunLayout) -> Manifest:
    return _conversion_like_job(
        layout,
        layout.convert_job_base,
        CONVERT_MODULE,
        conversion_flags(layout),
        layout.settings.conversion_timeout_minutes,
    )


def export_job(layout: RunLayout, step: int) -> Manifest:
    return _conversion_like_job(
        layout,
        layout.export_job_base,
        EXPORT_MODULE,
        export_flags(layout, step),
        layout.settings.export_timeout_minutes,
    )


def train_script(layout: RunLayout) -> str:
    """The client's shell line: the optimizer patch when asked, then train_rl."""
    steps = []
    if layout.settings.optimizer == "adafactor":
        steps.append(f"python3 -c {shlex.quote(OPTIMIZER_PATCH)}")
    steps.append(python_command(TRAIN_MODULE, train_flags(layout)))
    return " && ".join(steps)


def train_job(layout: RunLayout) -> Manifest:
    """The GRPO client: a CPU pod on cpu-np that drives the TPUs through the Pathways proxy."""
    env = _env(
        {
            "JAX_PLATFORMS": "proxy,cpu",
            "JAX_BACKEND_TARGET": f"grpc://{layout.backend_head_host}:29000",
            "ENABLE_PATHWAYS_PERSISTENCE": "1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            **PATHWAYS_ENV,
        }
    )
    env.append({"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    env.append(_token_env(layout))
    container = {
        "name": CONTAINER,
        "image": layout.settings.cloud_image_name,
        "command": ["bash", "-c", train_script(layout)],
        "env": env,
        "resources": {
            "requests": {"cpu": "8", "memory": "32Gi"},
            "limits": {"memory": "100Gi"},
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(layout, JOB_NAME_PREFIX + layout.train_job_base),
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "activeDeadlineSeconds": layout.settings.training_timeout_minutes * 60,
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
            "template": {
                "metadata": {"labels": dict(layout.labels)},
                "spec": {
                    "restartPolicy": "Never",
                    **storage_identity(layout),
                    "nodeSelector": {"cloud.google.com/gke-nodepool": CPU_NODE_POOL},
                    "containers": [container],
                },
            },
        },
    }


def _label_env(name: str, label: str) -> Manifest:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}}


HEAD_ENV = _label_env("PATHWAYS_HEAD", "jobset.sigs.k8s.io/coordinator")


def _pathways_image(name: str, layout: RunLayout) -> str:
    return f"{PATHWAYS_REPO}/{name}:{layout.settings.pathways_image_tag}"


def backend_jobset(layout: RunLayout) -> Manifest:
    """The headless Pathways backend: proxy + resource manager on cpu-np, workers on the slice."""
    s = layout.settings
    scratch = f"--gcs_scratch_location={layout.pathways_scratch}"
    rm_address = "--resource_manager_address=$(PATHWAYS_HEAD):29001"
    common_env = _env(PATHWAYS_ENV)
    proxy = {
        "name": "pathways-proxy",
        "image": _pathways_image("proxy_server", layout),
        "args": ["--server_port=29000", rm_address, scratch],
        "ports": [{"containerPort": 29000}],
        "env": [HEAD_ENV, *common_env],
        "resources": {"limits": {"cpu": "16", "memory": "100Gi"}},
    }
    resource_manager = {
        "name": "pathways-rm",
        "image": _pathways_image("server", layout),
        "args": [
            "--server_port=29001",
            scratch,
            "--node_type=resource_manager",
            f"--instance_count={s.cluster_nodepool_count}",
            f"--instance_type={PATHWAYS_INSTANCE_TYPE}:{s.topology}",
        ],
        "ports": [{"containerPort": 29001}, {"containerPort": 29002}],
        "env": [HEAD_ENV, *_env({"TPU_SKIP_MDS_QUERY": "true"}), *common_env],
        "resources": {"limits": {"cpu": "8", "memory": "32Gi"}},
    }
    worker = {
        "name": "pathways-worker",
        "image": _pathways_image("server", layout),
        "args": ["--server_port=29005", rm_address, scratch],
        "ports": [{"containerPort": p} for p in (29005, 29006, 8471, 8080)],
        "env": [
            HEAD_ENV,
            _label_env("MEGASCALE_COORDINATOR_ADDRESS", "jobset.sigs.k8s.io/coordinator"),
            _label_env("MEGASCALE_NUM_SLICES", "jobset.sigs.k8s.io/replicatedjob-replicas"),
            _label_env("MEGASCALE_SLICE_ID", "jobset.sigs.k8s.io/job-index"),
            *_env({"XCLOUD_ENVIRONMENT": "GCP", "MEGASCALE_GRPC_ENABLE_XOR_TRACER": "false"}),
            *common_env,
        ],
        "resources": _tpu_limits(),
    }
    head_pod = {
        "restartPolicy": "Never",
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "nodeSelector": {"cloud.google.com/gke-nodepool": CPU_NODE_POOL},
        "containers": [proxy, resource_manager],
    }
    hosts = layout.hosts
    metadata = _metadata(layout, layout.backend_jobset, _queue_label(layout))
    metadata["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] = (
        "cloud.google.com/gke-nodepool"
    )
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "network": {"enableDNSHostnames": True},
            "coordinator": {"replicatedJob": "pathways-head"},
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "failurePolicy": {"maxRestarts": s.backend_restarts},
            "replicatedJobs": [
                {
                    "name": "pathways-head",
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": dict(layout.labels)},
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"labels": dict(layout.labels)},
                                "spec": head_pod,
                            },
                        },
                    },
                },
                {
                    "name": "worker",
                    "replicas": s.cluster_nodepool_count,
                    "template": {
                        "metadata": {"labels": dict(layout.labels)},
                        "spec": {
                            "completionMode": "Indexed",
                            "parallelism": hosts,
                            "completions": hosts,
                            "backoffLimit": hosts * 4,
                            "template": {
                                "metadata": {"labels": dict(layout.labels)},
                                "spec": _tpu_pod_spec(layout, [worker], "OnFailure"),
                            },
                        },
                    },
                },
            ],
        },
    }


def token_secret(layout: RunLayout, token: str | None = None) -> Manifest:
    """The Hugging Face token Secret; without a token (as in a plan), its data is left out."""
    secret: Manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(layout, layout.token_secret),
    }
    if token is not None:
        secret["data"] = {TOKEN_KEY: base64.b64encode(token.encode()).decode()}
    return secret
