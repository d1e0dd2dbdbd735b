"""The identity of each model, checkpoint, result and record a run's steps read or write, as an
OpenLineage dataset: a namespace (the store) and a name unique in it (docs/lineage.md, Names).

- Cloud Storage, the naming spec's own (https://openlineage.io/docs/spec/naming; spec/Naming.md
  in OpenLineage/OpenLineage, "GCS"): namespace `gs://{bucket name}`, name the object's path. The
  path is written without its leading and trailing '/', as the google provider names a GCS
  dataset (apache-airflow-providers-google 22.8.0, cloud/openlineage/utils.py lines 207-209,
  extract_ds_name_from_gcs_path): a folder gets one name whichever operator emits it.
- Hugging Face and Vertex AI Model Registry, ours (the spec names neither): the datasource's
  address as the namespace, the path the owner's own tools write after it as the name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

GCS = "gs://"
# huggingface_hub's default endpoint (constants.py _HF_DEFAULT_ENDPOINT, 2.4.0): the Hub itself;
# a mirror (HF_ENDPOINT) would be another datasource, another namespace
HUGGING_FACE = "https://huggingface.co"
# the Hub's datasets are under datasets/ in its URLs and in HfFileSystem's paths
# (hf_file_system.py: `hf://datasets/<repo-id>[@<revision>]/<path/in/repo>`); models are not
HF_DATASETS = "datasets/"
# the service of every Vertex AI resource, whatever the region or endpoint a call went through
VERTEX_AI = "https://aiplatform.googleapis.com"
# a version by its id (versionId: "Immutable ... an auto-incrementing decimal number", REST
# Model resource), never by an alias, which moves to another version
VERSION_NAME = re.compile(r"projects/[^/@]+/locations/[^/@]+/models/[^/@]+@[0-9]+")
# MaxText 0.2.4's training data when extra_train_args name none: configs/post_train/rl.yml:236
# `dataset_name: 'openai/gsm8k'`, loaded by trainers/post_train/rl/train_rl.py:180
# `datasets.load_dataset(dataset_name, name=tmvp_config.hf_subset, split=split)`: no revision,
# so the Hub's default branch
RL_YML_DATASET = "openai/gsm8k"
HUB_DEFAULT_REVISION = "main"
# Dataplex: "Length of each Fully Qualified Name in inputs and outputs is limited to 4000
# characters" (https://cloud.google.com/data-catalog/docs/how-to/open-lineage, Limitations)
FQN_LIMIT = 4000


@dataclass(frozen=True, order=True)
class DatasetId:
    """An OpenLineage dataset's identity: its namespace and its name in it."""

    namespace: str
    name: str

    @property
    def fqn(self) -> str:
        """Namespace and name joined, the URI the naming spec says the pair forms ("The
        namespace and name of a datasource can be combined to form a URI"): Dataplex's
        `fqn is namespace and name concatenation`, its 4000-character limit applies to it."""
        return f"{self.namespace}/{self.name}"

    def as_dict(self) -> dict[str, str]:
        """The OpenLineage Dataset object's two required fields."""
        return {"namespace": self.namespace, "name": self.name}


def gcs_dataset(uri: str) -> DatasetId:
    """The dataset of a gs:// object or folder."""
    if not uri.startswith(GCS):
        raise ValueError(f"not a gs:// URI: {uri!r}")
    bucket, _, path = uri.removeprefix(GCS).partition("/")
    name = path.strip("/")
    if not bucket or not name:
        raise ValueError(f"{uri!r} names no object or folder in a bucket")
    return DatasetId(f"{GCS}{bucket}", name)


def _revision(revision: str) -> str:
    """A revision as one path segment: '/' (a `refs/pr/1`) and '@' quoted, as HfFileSystem
    writes one (hf_file_system.py safe_quote: `quote(s, safe="")`) and unquotes it."""
    return quote(revision, safe="")


def hf_model(repo_id: str, revision: str) -> DatasetId:
    """A Hugging Face model repository at a revision: `{repo_id}@{revision}` on the Hub."""
    return DatasetId(HUGGING_FACE, f"{repo_id}@{_revision(revision)}")


def hf_dataset(repo_id: str, revision: str = HUB_DEFAULT_REVISION) -> DatasetId:
    """A Hugging Face dataset repository at a revision: `datasets/{repo_id}@{revision}`."""
    return DatasetId(HUGGING_FACE, f"{HF_DATASETS}{repo_id}@{_revision(revision)}")


def vertex_model_version(resource_name: str) -> DatasetId:
    """A Vertex AI Model Registry version by its resource name,
    `projects/<p>/locations/<r>/models/<id>@<version id>` (tpu_rl.promotion.registry.
    RegisteredVersion.name, the champion record's registry_version)."""
    if not VERSION_NAME.fullmatch(resource_name):
        raise ValueError(
            f"not a model version's resource name (projects/<p>/locations/<r>/models/<id>@"
            f"<version id>): {resource_name!r}"
        )
    return DatasetId(VERTEX_AI, resource_name)


class ModelSource(Protocol):
    """The settings the builders read (tpu_rl.settings.fields.RunSettings has them)."""

    @property
    def hf_model_path(self) -> str: ...

    @property
    def hf_revision(self) -> str: ...

    @property
    def extra_train_args(self) -> Sequence[str]: ...


class RunPaths(Protocol):
    """What the builders read of a run: tpu_rl.layout.RunLayout has all of it. Taken by its
    shape, not imported: tpu_rl.layout imports Airflow (through tpu_rl.deployment), which the
    pure contract keeps out of this package."""

    @property
    def settings(self) -> ModelSource: ...

    @property
    def deployment(self) -> str: ...

    @property
    def model_root(self) -> str: ...

    @property
    def maxtext_dir(self) -> str: ...

    @property
    def checkpoints_dir(self) -> str: ...

    @property
    def heldout_dir(self) -> str: ...

    @property
    def export_dir(self) -> str: ...


def base_model(run: RunPaths) -> DatasetId:
    """The Hugging Face model and revision `convert` reads."""
    return hf_model(run.settings.hf_model_path, run.settings.hf_revision)


def training_data(run: RunPaths) -> DatasetId:
    """The Hugging Face dataset training reads: extra_train_args' dataset_name, else rl.yml's.
    ValueError for hf_train_files (parquet files in place of a Hub dataset: not named yet)."""
    flags = dict(arg.partition("=")[::2] for arg in run.settings.extra_train_args)
    if "hf_train_files" in flags:
        raise ValueError(
            "extra_train_args set hf_train_files: training reads those files, which lineage "
            "does not name yet"
        )
    return hf_dataset(flags.get("dataset_name") or RL_YML_DATASET)


def converted_checkpoint(run: RunPaths) -> DatasetId:
    """The converted checkpoint's folder, shared by the runs that convert the same model,
    revision and scan_layers (layout.maxtext_dir)."""
    return gcs_dataset(run.maxtext_dir)


def checkpoint_step(run: RunPaths, step: int) -> DatasetId:
    """A committed checkpoint step's folder, `<checkpoints>/<step>/`: what export records as
    its checkpoint_uri, and so the champion record too."""
    return gcs_dataset(f"{run.checkpoints_dir}{step}/")


def heldout_results(run: RunPaths) -> DatasetId:
    """The held-out evaluation's folder: every scored model's samples and results."""
    return gcs_dataset(run.heldout_dir)


def export_folder(run: RunPaths) -> DatasetId:
    """The exported Hugging Face checkpoint's folder."""
    return gcs_dataset(run.export_dir)


def champion_record(run: RunPaths) -> DatasetId:
    """The deployment's champion record for the model: tpu_rl.promotion.champion.champion_uri,
    written out here (that module reaches storage, which the pure contract keeps out)."""
    return gcs_dataset(f"{run.model_root}/champions/{run.deployment}.json")
