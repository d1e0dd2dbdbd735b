"""One run's names, labels and GCS paths (tpu_rl.layout): unique per run and deployment."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tpu_rl import layout as run_layout
from tpu_rl.layout import (
    JOB_NAME_PREFIX,
    RUN_ID_ANNOTATION,
    RUN_LABEL,
    RunLayout,
    console_object_url,
    console_url,
    run_slug,
    split_gcs_uri,
)
from tpu_rl.settings.run_settings import load_settings

RUN_ID = "manual__2027-01-01T00:00:00+00:00"


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    return RunLayout(load_settings(tutorial_conf), RUN_ID, "test-deployment")


def test_a_slug_is_short_dns_safe_and_tells_runs_and_deployments_apart():
    slug = run_slug(RUN_ID, "a")
    assert re.fullmatch(r"rl-[0-9a-f]{10}", slug)
    assert slug == run_slug(RUN_ID, "a")
    assert len({slug, run_slug(RUN_ID, "b"), run_slug("manual__2", "a")}) == 3


def test_the_kubernetes_names_carry_the_slug_and_jobs_the_operators_prefix(layout):
    slug = layout.slug
    assert layout.job_names == {
        "convert": f"{JOB_NAME_PREFIX}{slug}-convert",
        "train": f"{JOB_NAME_PREFIX}{slug}-train",
        "export": f"{JOB_NAME_PREFIX}{slug}-export",
        "champion": f"{JOB_NAME_PREFIX}{slug}-champion",
        "heldout": f"{JOB_NAME_PREFIX}{slug}-heldout",
    }
    assert layout.backend_jobset == f"{slug}-backend"
    assert layout.token_secret == f"{slug}-hf-token"
    assert layout.backend_head_host == f"{slug}-backend-pathways-head-0-0.{slug}-backend"


def test_the_labels_and_selector_name_the_run_and_its_recorded_deployment(layout):
    assert layout.labels[RUN_LABEL] == layout.slug
    assert layout.labels["tpu-rl.dev/deployment"] == "test-deployment"
    assert layout.labels["app.kubernetes.io/managed-by"] == "tpu-rl-airflow"
    assert layout.run_selector == f"{RUN_LABEL}={layout.slug},tpu-rl.dev/deployment=test-deployment"
    assert layout.annotations == {RUN_ID_ANNOTATION: RUN_ID}


def test_the_hosts_are_the_slices_hosts_times_the_pool_count(tutorial_conf):
    settings = load_settings(tutorial_conf)
    one = RunLayout(settings, RUN_ID, "d")
    # validate allows one slice with MaxText 0.2.4: two, set past it, for the arithmetic
    two = RunLayout(dataclasses.replace(settings, cluster_nodepool_count=2), RUN_ID, "d")
    assert one.hosts == two.hosts == 8  # v6e-32: 4 chips a host
    assert (one.pool_hosts, two.pool_hosts) == (8, 16)
    assert run_layout.pool_hosts(two.settings) == 16


def test_the_converted_model_is_keyed_by_what_changes_its_layout(tutorial_conf, layout):
    assert layout.maxtext_key == "google--gemma-4-26b-a4b-it/main/scan_layers-false"
    root = "gs://my-tpu-project-rl/gemma4-26b"
    assert layout.maxtext_dir == f"{root}/max-text-format/{layout.maxtext_key}/"
    assert layout.maxtext_items == f"{layout.maxtext_dir}0/items/"
    assert layout.maxtext_lock == f"{layout.maxtext_dir}conversion.lock"
    other = RunLayout(load_settings({**tutorial_conf, "scan_layers": True}), "x", "other")
    assert other.maxtext_dir != layout.maxtext_dir  # not shared across layouts
    same = RunLayout(layout.settings, "another run", "another deployment")
    assert same.maxtext_dir == layout.maxtext_dir  # shared by the runs converting the same


def test_a_path_part_makes_one_readable_folder_of_any_value():
    assert run_layout._path_part("org/model v2") == "org--model_v2"
    assert run_layout._path_part("a:b@c") == "a_b_c"
    assert run_layout._path_part("") == "_"


def test_the_runs_outputs_are_under_its_own_slug(layout):
    root, slug = "gs://my-tpu-project-rl/gemma4-26b", layout.slug
    assert layout.checkpoints_dir == f"{root}/trained/{slug}/checkpoints/actor/"
    assert layout.checkpoint_params(25) == f"{layout.checkpoints_dir}25/model_params/"
    assert layout.tensorboard_dir == f"{root}/trained/{slug}/tensorboard/"
    assert layout.training_attempts == f"{root}/trained/{slug}/training_attempts.json"
    assert layout.export_dir == f"{root}/hf-trained/{slug}/"
    assert layout.pathways_scratch == f"gs://my-tpu-project-rl/pathways/{slug}/"


def test_the_rung_is_the_capacity_and_zone(layout):
    assert layout.rung == "reservation@us-east5-b"


def test_a_gcs_uri_splits_into_its_bucket_and_path():
    assert split_gcs_uri("gs://bucket/path/inside/") == ("bucket", "path/inside/")
    assert split_gcs_uri("gs://bucket") == ("bucket", "")


def test_the_consoles_pages_of_a_folder_and_of_an_object():
    assert console_url("gs://b/m/trained/") == (
        "https://console.cloud.google.com/storage/browser/b/m/trained/"
    )
    assert console_object_url("gs://b/runs/a report.md") == (
        "https://console.cloud.google.com/storage/browser/_details/b/runs/a%20report.md"
    )
