"""Where one run puts things: Kubernetes names, labels and GCS paths, unique per run."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from tpu_rl.cluster.blueprint import default_state_prefix
from tpu_rl.deployment import DAG_LABEL, DEPLOYMENT_LABEL
from tpu_rl.names import DAG_ID

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

MANAGED_BY = "tpu-rl-airflow"
RUN_LABEL = "tpu-rl.dev/run"
RUN_ID_ANNOTATION = "tpu-rl.dev/run-id"
# KubernetesJobOperator always prefixes Job names with this.
JOB_NAME_PREFIX = "job-"


def run_slug(run_id: str, deployment: str) -> str:
    """A short DNS-safe name for an Airflow run of a deployment: 'rl-' + 10 hex chars of the hash
    of both. The run id alone is the same in every Airflow for one schedule slot; with the
    deployment's identity two deployments' runs never share a Kubernetes name or a GCS folder.
    ('/' cannot occur in an identity, a label value: the pair hashes unambiguously.)"""
    return "rl-" + hashlib.sha256(f"{deployment}/{run_id}".encode()).hexdigest()[:10]


def pool_hosts(settings: RunSettings) -> int:
    """TPU VM hosts of the whole pool: hosts per slice x slices."""
    return settings.slices.hosts


@dataclass(frozen=True)
class RunLayout:
    """Names and paths derived from the settings, the Airflow run id and the deployment identity
    the run started with (tpu_rl.run_record)."""

    settings: RunSettings
    run_id: str
    deployment: str

    @property
    def slug(self) -> str:
        return run_slug(self.run_id, self.deployment)

    # Kubernetes names (Job bases: the operator adds JOB_NAME_PREFIX)
    @property
    def convert_job_base(self) -> str:
        return f"{self.slug}-convert"

    @property
    def train_job_base(self) -> str:
        return f"{self.slug}-train"

    @property
    def export_job_base(self) -> str:
        return f"{self.slug}-export"

    @property
    def champion_job_base(self) -> str:
        """The champion's evaluation client; also its MaxText run_name (its own, so Tunix finds
        no checkpoint of this run to restore instead of the champion's)."""
        return f"{self.slug}-champion"

    @property
    def heldout_job_base(self) -> str:
        return f"{self.slug}-heldout"

    @property
    def job_names(self) -> dict[str, str]:
        """The Jobs' Kubernetes names by step: each base with the prefix the operator adds."""
        bases = {
            "convert": self.convert_job_base,
            "train": self.train_job_base,
            "export": self.export_job_base,
            "champion": self.champion_job_base,
            "heldout": self.heldout_job_base,
        }
        return {step: JOB_NAME_PREFIX + base for step, base in bases.items()}

    @property
    def backend_jobset(self) -> str:
        return f"{self.slug}-backend"

    @property
    def token_secret(self) -> str:
        return f"{self.slug}-hf-token"

    @property
    def backend_head_host(self) -> str:
        """DNS name of the Pathways head pod (JobSet coordinator) inside the namespace."""
        return f"{self.backend_jobset}-pathways-head-0-0.{self.backend_jobset}"

    @property
    def hosts(self) -> int:
        return self.settings.slices.hosts_per_slice

    @property
    def pool_hosts(self) -> int:
        return pool_hosts(self.settings)

    @property
    def rung(self) -> str:
        """Where the TPUs come from: the capacity mode and zone (a capacity ladder's rung)."""
        return f"{self.settings.capacity}@{self.settings.zone}"

    @property
    def labels(self) -> dict[str, str]:
        return {
            "app.kubernetes.io/managed-by": MANAGED_BY,
            RUN_LABEL: self.slug,
            DEPLOYMENT_LABEL: self.deployment,
            DAG_LABEL: DAG_ID,
        }

    @property
    def run_selector(self) -> str:
        """The label selector of this run's Kubernetes objects: the run's own identity (its
        slug and recorded deployment, tpu_rl.run_record), not the deployment's current one."""
        return f"{RUN_LABEL}={self.slug},{DEPLOYMENT_LABEL}={self.deployment}"

    @property
    def annotations(self) -> dict[str, str]:
        return {RUN_ID_ANNOTATION: self.run_id}

    # GCS
    @property
    def model_root(self) -> str:
        return f"gs://{self.settings.gcs_bucket}/{self.settings.model_name}"

    @property
    def maxtext_key(self) -> str:
        """What changes the converted checkpoint's layout: the Hugging Face repository and
        revision converted, and scan_layers (stacked or per-layer arrays)."""
        s = self.settings
        scan = "true" if s.scan_layers else "false"
        return f"{_path_part(s.hf_model_path)}/{_path_part(s.hf_revision)}/scan_layers-{scan}"

    @property
    def maxtext_dir(self) -> str:
        """Conversion output, shared by the runs that convert the same thing (reused once
        committed): keyed by `maxtext_key`."""
        return f"{self.model_root}/max-text-format/{self.maxtext_key}/"

    @property
    def maxtext_step(self) -> str:
        """to_maxtext saves one Orbax step, 0: its folder."""
        return f"{self.maxtext_dir}0/"

    @property
    def maxtext_items(self) -> str:
        return f"{self.maxtext_step}items/"

    @property
    def maxtext_lock(self) -> str:
        """The object a run holds while it converts into `maxtext_dir` (tpu_rl.conversion_lock)."""
        return f"{self.maxtext_dir}conversion.lock"

    @property
    def trained_dir(self) -> str:
        return f"{self.model_root}/trained/"

    @property
    def checkpoints_dir(self) -> str:
        """Where train_rl writes actor checkpoints: <base>/<run_name>/checkpoints/actor/."""
        return f"{self.trained_dir}{self.slug}/checkpoints/actor/"

    @property
    def tensorboard_dir(self) -> str:
        """Where train_rl writes its TensorBoard event files: <base>/<run_name>/tensorboard/
        (maxtext-v0.2.4 src/maxtext/configs/types.py:4640-4645)."""
        return f"{self.trained_dir}{self.slug}/tensorboard/"

    @property
    def training_attempts(self) -> str:
        """The reward wait's record of the training attempts, in the run's own output folder."""
        return f"{self.trained_dir}{self.slug}/training_attempts.json"

    @property
    def heldout_dir(self) -> str:
        """The held-out evaluation's folder: MaxText's results under <label>/eval_results/
        (maxtext/eval/runner/harness_runner.py:297), the kept samples under <label>/."""
        return f"{self.trained_dir}{self.slug}/heldout/"

    def heldout_samples_dir(self, label: str) -> str:
        return f"{self.heldout_dir}{label}/"

    def checkpoint_params(self, step: int) -> str:
        return f"{self.checkpoints_dir}{step}/model_params/"

    @property
    def export_dir(self) -> str:
        return f"{self.model_root}/hf-trained/{self.slug}/"

    @property
    def pathways_scratch(self) -> str:
        return f"gs://{self.settings.gcs_bucket}/pathways/{self.slug}/"

    @property
    def terraform_state_prefix(self) -> str:
        """Per cluster, not per run: whichever run or worker destroys it finds the state."""
        return default_state_prefix(self.settings)


def _path_part(value: str) -> str:
    """`value` as one readable folder name: '/' and other unsafe characters become '--'/'_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", value.replace("/", "--")) or "_"


def split_gcs_uri(uri: str) -> tuple[str, str]:
    """('bucket', 'path/inside/') from 'gs://bucket/path/inside/'."""
    bucket, _, path = uri.removeprefix("gs://").partition("/")
    return bucket, path


def console_url(uri: str) -> str:
    """The Cloud console's browser page of a gs:// folder."""
    bucket, path = split_gcs_uri(uri)
    return f"https://console.cloud.google.com/storage/browser/{bucket}/{path}"


def console_object_url(uri: str) -> str:
    """The Cloud console's page of one gs:// object (its object-details URL,
    console.cloud.google.com/storage/browser/_details/BUCKET/OBJECT)."""
    bucket, path = split_gcs_uri(uri)
    return (
        f"https://console.cloud.google.com/storage/browser/_details/{quote(bucket)}/{quote(path)}"
    )
