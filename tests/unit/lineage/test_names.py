"""Dataset names: Cloud Storage's as OpenLineage's naming spec gives them (and as the google
provider names the same paths), ours for Hugging Face and Vertex AI, and a run's datasets named
from its layout where its steps write them."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import unquote

import pytest
from airflow.providers.google.cloud.openlineage.utils import extract_ds_name_from_gcs_path

from tpu_rl.layout import RunLayout, split_gcs_uri
from tpu_rl.lineage import names
from tpu_rl.lineage.names import (
    DatasetId,
    gcs_dataset,
    hf_dataset,
    hf_model,
    vertex_model_version,
)
from tpu_rl.promotion.champion import champion_uri


@pytest.mark.parametrize(
    ("uri", "namespace", "name"),
    [
        # the spec's GCS identifier: namespace gs://{bucket name}, unique name {path}
        ("gs://my-bucket/dir/file.csv", "gs://my-bucket", "dir/file.csv"),
        # a folder: its path without the trailing '/'
        ("gs://tpu-rl/gemma4-26b/hf-trained/rl-1/", "gs://tpu-rl", "gemma4-26b/hf-trained/rl-1"),
        (
            "gs://tpu-rl/gemma4-26b/trained/rl-1/checkpoints/actor/50",
            "gs://tpu-rl",
            "gemma4-26b/trained/rl-1/checkpoints/actor/50",
        ),
    ],
)
def test_cloud_storage_is_named_as_the_naming_spec_names_it(uri, namespace, name):
    dataset = gcs_dataset(uri)
    assert dataset == DatasetId(namespace, name)
    # "The namespace and name of a datasource can be combined to form a URI"
    assert dataset.fqn == uri.rstrip("/")
    assert dataset.as_dict() == {"namespace": namespace, "name": name}


def run_paths(layout: RunLayout) -> dict[str, tuple[DatasetId, str]]:
    """Each GCS dataset the builders name for the run, with the path its step writes."""
    return {
        "converted checkpoint": (names.converted_checkpoint(layout), layout.maxtext_dir),
        "checkpoint step": (names.checkpoint_step(layout, 50), f"{layout.checkpoints_dir}50/"),
        "held-out results": (names.heldout_results(layout), layout.heldout_dir),
        "export": (names.export_folder(layout), layout.export_dir),
        "champion record": (
            names.champion_record(layout),
            champion_uri(layout.model_root, layout.deployment),
        ),
    }


def test_each_run_path_gets_the_name_the_google_provider_gives_it(layout):
    """One folder, one dataset: our events join the google provider's GCS operators' (its
    extract_ds_name_from_gcs_path, the name of a gs:// path in their lineage)."""
    for what, (dataset, uri) in run_paths(layout).items():
        bucket, path = split_gcs_uri(uri)
        assert dataset == DatasetId(f"gs://{bucket}", extract_ds_name_from_gcs_path(path)), what
        assert len(dataset.fqn) <= names.FQN_LIMIT


def test_the_champion_record_is_the_object_promotion_writes(layout):
    assert names.champion_record(layout) == gcs_dataset(
        champion_uri(layout.model_root, layout.deployment)
    )
    assert names.champion_record(layout).name.endswith("/champions/test-deployment.json")


def test_a_champions_checkpoint_uri_names_the_step_its_run_wrote(layout):
    """The champion record's checkpoint_uri is export's `<checkpoints>/<step>/`: the same
    dataset training named, with or without the trailing '/'."""
    written = names.checkpoint_step(layout, 50)
    assert gcs_dataset(f"{layout.checkpoints_dir}50/") == written
    assert gcs_dataset(f"{layout.checkpoints_dir}50") == written
    assert names.checkpoint_step(layout, 25) != written


@pytest.mark.parametrize("uri", ["s3://bucket/key", "gs://bucket", "gs://bucket/", "gs:///path"])
def test_what_is_no_object_or_folder_in_a_bucket_is_refused(uri):
    with pytest.raises(ValueError):
        gcs_dataset(uri)


def test_a_hugging_face_model_is_its_repository_at_a_revision():
    model = hf_model("google/gemma-3-4b-it", "main")
    assert model == DatasetId("https://huggingface.co", "google/gemma-3-4b-it@main")
    assert model.fqn == "https://huggingface.co/google/gemma-3-4b-it@main"
    pinned = hf_model("google/gemma-3-4b-it", "093f9f388b31de276ce2de164bdc2081324b9767")
    assert pinned != model  # a commit pins other weights than a branch may
    # a revision with '/' stays one segment, quoted as HfFileSystem quotes it
    pull = hf_model("google/gemma-3-4b-it", "refs/pr/1")
    assert pull.name == "google/gemma-3-4b-it@refs%2Fpr%2F1"
    assert unquote(pull.name.partition("@")[2]) == "refs/pr/1"


def test_a_hugging_face_dataset_is_under_datasets_and_never_a_models_name():
    dataset = hf_dataset("openai/gsm8k")
    assert dataset == DatasetId("https://huggingface.co", "datasets/openai/gsm8k@main")
    assert dataset != hf_model("openai/gsm8k", "main")  # a model and a dataset may share an id
    assert hf_dataset("openai/gsm8k", "v2").name == "datasets/openai/gsm8k@v2"


def test_a_run_reads_its_settings_model_at_its_revision(layout):
    settings = layout.settings
    assert names.base_model(layout) == hf_model(settings.hf_model_path, settings.hf_revision)
    other = RunLayout(replace(settings, hf_revision="v1.1"), layout.run_id, layout.deployment)
    assert names.base_model(other).name == f"{settings.hf_model_path}@v1.1"


def with_train_args(layout: RunLayout, *args: str) -> RunLayout:
    settings = replace(layout.settings, extra_train_args=list(args))
    return RunLayout(settings, layout.run_id, layout.deployment)


def test_training_reads_rl_yml_s_dataset_unless_the_run_names_another(layout):
    assert names.training_data(layout) == hf_dataset("openai/gsm8k", "main")
    named = with_train_args(layout, "eval_interval=5", "dataset_name=nvidia/OpenMathInstruct-2")
    assert names.training_data(named) == hf_dataset("nvidia/OpenMathInstruct-2")
    files = with_train_args(layout, "hf_train_files=gs://b/train-*.parquet")
    with pytest.raises(ValueError, match="hf_train_files"):
        names.training_data(files)


def test_a_vertex_version_is_named_by_its_id_never_an_alias():
    name = "projects/123456/locations/us-east5/models/tpu-rl-gemma@3"
    assert vertex_model_version(name) == DatasetId("https://aiplatform.googleapis.com", name)
    for wrong in (
        "projects/123456/locations/us-east5/models/tpu-rl-gemma@champion",  # moves
        "projects/123456/locations/us-east5/models/tpu-rl-gemma",  # the model, no version
        "tpu-rl-gemma@3",
    ):
        with pytest.raises(ValueError, match="resource name"):
            vertex_model_version(wrong)
