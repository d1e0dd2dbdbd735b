"""Kubernetes objects of a run, as plain dicts: what `make plan` writes and the DAG submits."""

from __future__ import annotations

import base64
import shlex
from typing import TYPE_CHECKING, Any

from tpu_rl import deployment
from tpu_rl.cluster import capacity
from tpu_rl.cluster.blueprint import CPU_NODE_POOL
from tpu_rl.jobs.maxtext_flags import (
    TOKEN_ENV,
    champion_evaluation_flags,
    conversion_flags,
    export_flags,
    python_command,
    train_flags,
)
from tpu_rl.layout import RunLayout
from tpu_rl.names import CONTAINER
from tpu_rl.tpu import generation_for

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

Manifest = dict[str, Any]

TOKEN_KEY = "token"
CONVERT_MODULE = "maxtext.checkpoint_conversion.to_maxtext"
EXPORT_MODULE = "maxtext.checkpoint_conversion.to_huggingface"
TRAIN_MODULE = "maxtext.trainers.post_train.rl.train_rl"
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


def env_vars(values: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _token_env(layout: RunLayout) -> dict[str, Any]:
    return {
        "name": TOKEN_ENV,
        "valueFrom": {"secretKeyRef": {"name": layout.token_secret, "key": TOKEN_KEY}},
    }


def object_metadata(
    layout: RunLayout, name: str, extra_labels: dict[str, str] | None = None
) -> Manifest:
    return {
        "name": name,
        "namespace": layout.settings.namespace,
        "labels": {**layout.labels, **(extra_labels or {})},
        "annotations": dict(layout.annotations),
    }


def queue_labels(layout: RunLayout) -> dict[str, str]:
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


def pod_priority() -> Manifest:
    """The deployment's PriorityClass for every pod of the run (none unless it names one)."""
    name = deployment.priority_class()
    return {"priorityClassName": name} if name else {}


def tpu_pod_spec(
    layout: RunLayout,
    containers: list[Manifest],
    restart_policy: str,
    identity: Manifest | None = None,
) -> Manifest:
    """Pod spec on the TPU slice's hosts, as gcluster schedules them (host network unless an
    identity says otherwise), on nodes of the run's capacity mode (GKE's flex-start/Spot label)."""
    return {
        "restartPolicy": restart_policy,
        **(HOST_NETWORK if identity is None else identity),
        "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": generation_for(
                layout.settings.tpu_type
            ).accelerator_label,
            "cloud.google.com/gke-tpu-topology": layout.settings.topology,
            **capacity.node_selector(layout.settings),
        },
        "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}],
        **pod_priority(),
        "containers": containers,
    }


def tpu_limits(settings: RunSettings) -> Manifest:
    """A TPU host pod's google.com/tpu: every chip of its VM."""
    chips = str(settings.slices.generation.chips_per_vm)
    return {"limits": {"google.com/tpu": chips}, "requests": {"google.com/tpu": chips}}


def tpu_job_deadline_seconds(layout: RunLayout, step_minutes: int) -> int:
    """A TPU Job's activeDeadlineSeconds: its wait for capacity plus its step's limit.

    Kubernetes counts the deadline from the Job's startTime, its pods' Pending time included:
    "the duration in seconds relative to the startTime that the job may be continuously active
    [...] If a Job is suspended [...] this timer will effectively be stopped and reset when the
    Job is resumed" (JobSpec.activeDeadlineSeconds,
    https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/#JobSpec), and
    it "applies to the duration of the job, no matter how many Pods are created"
    (https://kubernetes.io/docs/concepts/workloads/controllers/job/#job-termination-and-cleanup).
    Kueue resumes the Job as soon as its ClusterQueue's google.com/tpu quota admits it, which
    needs no node, so with flex-start the clock starts long before the slice exists. So the
    deadline is the task's own limit (tpu_rl.dag.limits.pending_plus): up to
    pending_timeout_minutes of waiting, then the step's limit. A deadline rather than none (the
    Airflow-side limit deleting the Job): a deferred Job wait has no on_kill, so a Job outlives
    a killed task or triggerer, and its own deadline is what still stops it and frees the slice.
    """
    return (layout.settings.pending_timeout_minutes + step_minutes) * 60


def _conversion_like_job(
    layout: RunLayout, job_name: str, module: str, flags: list[str], timeout_minutes: int
) -> Manifest:
    """A Job on every host of the slice; only completion index 0 works, as in the tutorial."""
    script = f'[ "$JOB_COMPLETION_INDEX" != "0" ] || {python_command(module, flags)}'
    return slice_job(layout, job_name, script, timeout_minutes)


def slice_job(layout: RunLayout, job_name: str, script: str, timeout_minutes: int) -> Manifest:
    """An Indexed Job running `script` on every host of the slice, with every chip of each,
    the token from the run's Secret, within its capacity wait plus `timeout_minutes`."""
    container = {
        "name": CONTAINER,
        "image": layout.settings.cloud_image_name,
        "command": ["bash", "-c", script],
        "env": [_token_env(layout)],
        "resources": tpu_limits(layout.settings),
    }
    hosts = layout.pool_hosts
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_metadata(layout, job_name, queue_labels(layout)),
        "spec": {
            "completionMode": "Indexed",
            "parallelism": hosts,
            "completions": hosts,
            "backoffLimit": 0,
            "activeDeadlineSeconds": tpu_job_deadline_seconds(layout, timeout_minutes),
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
            "template": {
                "metadata": {"labels": dict(layout.labels)},
                "spec": tpu_pod_spec(layout, [container], "Never", storage_identity(layout)),
            },
        },
    }


def conversion_job(layout: RunLayout) -> Manifest:
    return _conversion_like_job(
        layout,
        layout.job_names["convert"],
        CONVERT_MODULE,
        conversion_flags(layout),
        layout.settings.conversion_timeout_minutes,
    )


def export_job(layout: RunLayout, step: int) -> Manifest:
    return _conversion_like_job(
        layout,
        layout.job_names["export"],
        EXPORT_MODULE,
        export_flags(layout, step),
        layout.settings.export_timeout_minutes,
    )


def train_script(layout: RunLayout, flags: list[str] | None = None) -> str:
    """The client's shell line: the optimizer patch when asked, then train_rl (with `flags`,
    by default the run's training flags)."""
    steps = []
    if layout.settings.optimizer == "adafactor":
        steps.append(f"python3 -c {shlex.quote(OPTIMIZER_PATCH)}")
    steps.append(python_command(TRAIN_MODULE, train_flags(layout) if flags is None else flags))
    return " && ".join(steps)


def train_job(layout: RunLayout) -> Manifest:
    """The GRPO client: a CPU pod on cpu-np that drives the TPUs through the Pathways proxy."""
    # no capacity wait of its own: it starts once the backend's slice runs (and a resume's wait
    # counts inside training_timeout_minutes, as the reward wait's limit)
    deadline = layout.settings.training_timeout_minutes * 60
    return _client_job(layout, layout.job_names["train"], train_script(layout), deadline)


def champion_evaluation_job(layout: RunLayout, parameters_uri: str) -> Manifest:
    """The champion's evaluation: train_rl as the GRPO client runs it, on the same backend,
    scoring the checkpoint at `parameters_uri` without training (maxtext_flags says how)."""
    flags = champion_evaluation_flags(layout, parameters_uri)
    deadline = layout.settings.champion_eval_timeout_minutes * 60
    return _client_job(layout, layout.job_names["champion"], train_script(layout, flags), deadline)


def model_impl_env(layout: RunLayout) -> list[dict[str, Any]]:
    """tpu-inference's MODEL_IMPL_TYPE for the rollout's vLLM when the run chooses one (its
    default is auto: tpu_inference/envs.py), as run_gptoss_20b_rl.sh:82 sets flax_nnx."""
    impl = str(layout.settings.rollout_model_impl)
    return [] if impl == "auto" else env_vars({"MODEL_IMPL_TYPE": impl})


def _client_job(layout: RunLayout, name: str, script: str, deadline_seconds: int) -> Manifest:
    """A Pathways client Job: one CPU pod on cpu-np running `script` against the run's backend."""
    env = env_vars(
        {
            "JAX_PLATFORMS": "proxy,cpu",
            "JAX_BACKEND_TARGET": f"grpc://{layout.backend_head_host}:29000",
            "ENABLE_PATHWAYS_PERSISTENCE": "1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            **PATHWAYS_ENV,
        }
    )
    env.append({"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    env += model_impl_env(layout)
    env.append(_token_env(layout))
    container = {
        "name": CONTAINER,
        "image": layout.settings.cloud_image_name,
        "command": ["bash", "-c", script],
        "env": env,
        "resources": {
            "requests": {"cpu": "8", "memory": "32Gi"},
            "limits": {"memory": "100Gi"},
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_metadata(layout, name),
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_seconds,
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
            "template": {
                "metadata": {"labels": dict(layout.labels)},
                "spec": {
                    "restartPolicy": "Never",
                    **storage_identity(layout),
                    "nodeSelector": {"cloud.google.com/gke-nodepool": CPU_NODE_POOL},
                    **pod_priority(),
                    "containers": [container],
                },
            },
        },
    }


def token_secret(layout: RunLayout, token: str | None = None) -> Manifest:
    """The Hugging Face token Secret; without a token (as in a plan), its data is left out."""
    secret: Manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": object_metadata(layout, layout.token_secret),
    }
    if token is not None:
        secret["data"] = {TOKEN_KEY: base64.b64encode(token.encode()).decode()}
    return secret
