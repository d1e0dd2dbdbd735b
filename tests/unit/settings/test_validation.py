"""tpu_rl.settings.validation: every validation rule, each with a case that breaks it."""

from __future__ import annotations

import pytest

from tests.support.settings import errors_for
from tpu_rl.settings.param_specs import param_spec
from tpu_rl.settings.run_settings import (
    SETTING_FIELDS,
    RunSettings,
)
from tpu_rl.settings.table import settings_document
from tpu_rl.settings.validation import RULES

WATCHDOG_AND_SPEND = [
    *(n for n, f in SETTING_FIELDS.items() if n.startswith("health_") and str(f.type) == "float"),
    "max_spend_usd",
    "progress_report_minutes",
]


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("name", WATCHDOG_AND_SPEND)
def test_a_negative_nan_or_infinite_watchdog_or_spend_number_is_refused_by_name(
    tutorial_conf, name, value
):
    """A negative watchdog factor fires at every step, and a nan one turns its rule off (every
    comparison with nan is False): validation refuses both, and a nan spend setting. The form's
    text and the reference say the floor."""
    assert errors_for(tutorial_conf, **{name: value}) == [
        f"{name}: must be 0 or more and finite, got {value}"
    ]
    assert errors_for(tutorial_conf, **{name: 0.0}) == []
    assert param_spec(SETTING_FIELDS[name])["description"].endswith(" 0 or more.")
    assert f"| `{name}` | number, 0 or more |" in settings_document()


# Each validation rule: a setting change that breaks it, and the words its error carries.
RULE_CASES = [
    ("required_names", {"project": ""}, "project: required"),
    ("required_names", {"gcs_bucket": " "}, "gcs_bucket: required"),
    ("names", {"project": "My_Project"}, "project: 'My_Project' is not a project ID"),
    ("names", {"cluster_name": "a" * 21}, "is 21 characters long; at most 20"),
    ("names", {"cluster_name": "4gemma"}, "start with a lower-case letter"),
    ("names", {"cluster_name": "gemma-"}, "must not end with a hyphen"),
    ("bucket_name", {"gcs_bucket": "gs://my-bucket"}, "not a URL"),
    ("bucket_name", {"gcs_bucket": "My_Bucket"}, "only lower-case letters"),
    ("bucket_name", {"gcs_bucket": "ab"}, "3-63 characters"),
    ("bucket_name", {"gcs_bucket": "google-models"}, "'google'"),
    ("bucket_name", {"gcs_bucket": "a..b"}, "no '..'"),
    ("bucket_name", {"gcs_bucket": "192.168.1.1"}, "IP address"),
    ("region_and_zone", {"region": "useast5"}, "not a region name"),
    ("region_and_zone", {"zone": "us-east5"}, "not a zone name"),
    ("region_and_zone", {"zone": "us-east1-b"}, "not in region 'us-east5'"),
    ("tpu_shape", {"compute_type": "ct9-standard-4t"}, "compute_type: 'ct9-standard-4t' unknown"),
    (
        "tpu_shape",
        {"compute_type": "ct5p-hightpu-4t"},
        "compute_type: ct5p-hightpu-4t is not a v6e machine type: set "
        "compute_type=ct6e-standard-4t",
    ),
    ("tpu_shape", {"tpu_type": "v9-24"}, "tpu_type: 'v9-24' unknown"),
    ("tpu_shape", {"tpu_type": "v6e-24"}, "topology: 4x8 (32 chips) is a v6e-32, not a v6e-24"),
    (
        "tpu_shape",
        {"topology": "4x4"},
        "topology: 4x4 (16 chips) is a v6e-16, not a v6e-32: set tpu_type=v6e-16",
    ),
    ("tpu_shape", {"topology": "4by8"}, "must look like '4x8'"),
    ("tpu_shape", {"topology": "2x2x4"}, "v6e slices are AxB, like 4x8"),
    (
        "tpu_shape",
        {"tpu_type": "v5p-96", "topology": "2x4x6", "compute_type": "ct5p-hightpu-4t"},
        "topology: '2x4x6': v5p slices are 2x2x1, 2x2x2, 2x2x4, 2x4x4, or AxBxC of multiples of 4",
    ),
    (
        "slice_counts",
        {"num_trainer_slices": 1},
        "num_trainer_slices: 1 with num_samplers_slices -1: MaxText takes both -1 or both "
        "positive, and builds no mesh on positive ones; run on one slice: set "
        "cluster_nodepool_count 1",
    ),
    (
        "slice_counts",
        {"num_trainer_slices": 1, "num_samplers_slices": 1},
        "need 2 slices, the run has 1 (MaxText: 'Not enough slices for trainer and samplers')",
    ),
    (
        "slice_counts",
        {"cluster_nodepool_count": 2},
        "num_trainer_slices: -1 with 2 slices: MaxText would split one device list across slices",
    ),
    (
        "out_of_bounds",
        {"cluster_nodepool_count": 0},
        "cluster_nodepool_count: must be at least 1",
    ),
    ("out_of_bounds", {"num_batches": -5}, "num_batches: must be at least 1"),
    ("out_of_bounds", {"backend_restarts": -1}, "backend_restarts: must be 0 or more"),
    ("out_of_bounds", {"max_training_restarts": -1}, "max_training_restarts: must be 0 or"),
    ("out_of_bounds", {"max_training_restarts": 101}, "max_training_restarts: must be at most"),
    ("out_of_bounds", {"checkpoint_period": 0}, "checkpoint_period: must be at least 1"),
    (
        "out_of_bounds",
        {"cluster_nodepool_count": 10**400},
        "cluster_nodepool_count: must be at most 64, got a 400-digit number",
    ),
    ("out_of_bounds", {"poll_interval_seconds": 10**9}, "poll_interval_seconds: must be at most"),
    ("batch_division", {"train_micro_batch_size": 3}, "does not divide batch_size 4"),
    ("sequence_lengths", {"max_prefill_predict_length": 640}, "must be below max_target_length"),
    ("group_size", {"rl_num_generations": 1}, "needs at least 2"),
    ("device_fractions", {"trainer_devices_fraction": 0.75}, "exceeds 1"),
    ("device_fractions", {"sampler_devices_fraction": 0.0}, "must be in (0, 1]"),
    (
        "trainer_mesh",
        {"ici_tensor_parallelism": 3},
        "does not fit the trainer's 16 devices on v6e-32 (MaxText: the mesh's product must equal "
        "the devices per slice); make the product 16, or one axis -1",
    ),
    ("trainer_mesh", {"ici_expert_parallelism": -1}, "at most one may be -1"),
    ("trainer_mesh", {"ici_fsdp_parallelism": 4}, "tensor x expert x fsdp = 32"),
    (
        "trainer_mesh",
        {"trainer_devices_fraction": 0.3, "sampler_devices_fraction": 0.5},
        "not a whole number",
    ),
    (
        "sampler_mesh",
        {"rollout_tensor_parallelism": 3},
        "does not divide the sampler's 16 devices on v6e-32",
    ),
    (
        "sampler_ici_mesh",
        {"ici_fsdp_parallelism": 2, "sampler_devices_fraction": 0.25},
        "tensor x expert x fsdp = 16 fits the trainer's 16 devices but not the sampler's 8 on "
        "v6e-32: on one slice MaxText builds the rollout mesh with the trainer's ICI axes",
    ),
    (
        "physical_meshes",
        {"allow_split_physical_axes": False},
        "allow_split_physical_axes: false, and on the trainer's 16 devices of v6e-32 (4x8, the "
        "first 16 of 32) the tensor axis (2) is no product of whole physical axes",
    ),
    (
        "physical_meshes",
        {
            "trainer_devices_fraction": 0.125,
            "sampler_devices_fraction": 0.875,
            "ici_expert_parallelism": 1,
            "ici_tensor_parallelism": 1,
        },
        "sampler_devices_fraction: the sampler's 28 devices of v6e-32 (4x8, the last 28 of 32): "
        "they do not fill a box of chips (JAX's _get_physical_tpu_mesh asserts",
    ),
    ("ranges", {"learning_rate": 2.0}, "learning_rate: must be in (0, 1)"),
    ("ranges", {"decode_sampling_nucleus_p": 1.5}, "decode_sampling_nucleus_p"),
    ("ranges", {"decode_sampling_temperature": 0.0}, "decode_sampling_temperature"),
    ("ranges", {"hbm_utilization_vllm": 1.0}, "hbm_utilization_vllm"),
    ("ranges", {"min_reward_gain": float("nan")}, "min_reward_gain: must be a finite number"),
    ("reservation", {"reservation": ""}, "required with cluster_mode=create and capacity="),
    ("ladder", {"capacity_ladder": "reservation@us-east5-b, spot@us-west1-a"}, "outside the run"),
    (
        "reservation",
        {"capacity": "spot"},
        "reservation: 'v6e-32-reservation' given with capacity=spot, which takes no reservation",
    ),
    ("reservation", {"capacity": "flex_start"}, "capacity=flex_start, which takes no reservation"),
    (
        "reservation",
        {"capacity": "flex_start", "cluster_mode": "existing"},
        "capacity=flex_start, which takes no reservation",
    ),
    (
        "checkpoints",
        {"capacity": "spot", "reservation": "", "checkpoint_period": 60, "num_batches": 50},
        "checkpoint_period: 60 is not below num_batches 50",
    ),
    ("reservation", {"reservation": "Res_1"}, "is not a reservation name"),
    (
        "cluster_mode_dependencies",
        {"cluster_mode": "existing", "keep_cluster": True},
        "keep_cluster: only applies with cluster_mode=create",
    ),
    ("choices", {"cluster_mode": "reuse"}, "cluster_mode: must be 'create' or 'existing'"),
    ("choices", {"optimizer": "sgd"}, "optimizer: must be"),
    (
        "choices",
        {"capacity": "preemptible"},
        "capacity: must be 'reservation', 'calendar', 'flex_start' or 'spot', got 'preemptible'",
    ),
    ("choices", {"mu_dtype": "fp8"}, "mu_dtype: must be 'bfloat16', 'float32' or 'float16'"),
    ("choices", {"remat_policy": "everything"}, "remat_policy: must be 'full', 'minimal',"),
    ("authorized_cidr", {"authorized_cidr": "10.0.0.1/8"}, "is not a CIDR block"),
    ("kubernetes_names", {"namespace": "Team_A"}, "namespace: 'Team_A'"),
    ("kubernetes_names", {"kueue_queue": "user queue"}, "kueue_queue"),
    ("model_references", {"hf_model_path": "gemma-4"}, "must be a Hugging Face repo id"),
    ("model_references", {"model_name": "Gemma4"}, "not a MaxText model name"),
    ("model_references", {"cloud_image_name": "maxtext"}, "full image reference"),
    ("model_references", {"pathways_server_image": "server:-bad"}, "not an image reference"),
    ("model_references", {"pathways_proxy_server_image": "p/proxy_server"}, "needs a tag"),
    (
        "pinned_images",
        {"pathways_server_image": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest"},
        "pathways_server_image: 'us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest' "
        "is not pinned: `latest` moves with each push",
    ),
    ("pinned_images", {"cloud_image_name": "gcr.io/p/maxtext:latest"}, "allow_unpinned_images"),
    ("model_references", {"cloud_image_name": "gcr.io/p/MaxText:1"}, "not an image reference"),
    ("model_references", {"cloud_image_name": "gcr.io/p/maxtëxt:1"}, "not an image reference"),
    ("model_references", {"cloud_image_name": "gcr.io/p/m@sha256:AB"}, "not an image reference"),
    ("model_references", {"hf_model_path": "google/gemma--4"}, "'--' or '..'"),
    ("model_references", {"tokenizer_path": "google/gémma"}, "Hugging Face repo id"),
    ("model_references", {"tokenizer_path": "google/" + "g" * 90}, "at most 96"),
    ("model_references", {"hf_model_path": "google/-gemma"}, "Hugging Face repo id"),
    ("kubernetes_names", {"client_service_account": "WI_sa"}, "client_service_account"),
    ("toolkit_version", {"cluster_toolkit_version": "1.103"}, "must be a release tag"),
    ("vllm_overrides_json", {"vllm_hf_overrides": "{'a': 1}"}, "not valid JSON"),
    ("vllm_overrides_json", {"vllm_hf_overrides": "[1]"}, "must be a JSON object"),
    ("extra_train_args", {"extra_train_args": ["num_test_batches"]}, "must be key=value"),
    ("extra_train_args", {"extra_train_args": ["run_name=x"]}, "set by the run itself"),
    (
        "extra_train_args",
        {"extra_train_args": ["rl.num_generations=8"]},
        "set rl_num_generations instead",
    ),
    ("extra_train_args", {"extra_train_args": ["a=1", "a=2"]}, "a given twice"),
    ("gate_metric_names", {"gate_metrics": {"reward": 0.1}}, "'reward' is not an evaluation"),
    ("gate_metric_names", {"gate_metrics": {"accuracy": float("inf")}}, "must be a finite"),
    ("champion_gains", {"min_gain_over_champion": {"loss": 0.1}}, "not an evaluation metric"),
    ("champion_gains", {"min_gain_over_champion": {}}, "name at least one metric"),
    ("heldout_benchmarks", {"heldout_tasks": ["gsm8k; rm -rf /"]}, "is not an lm-eval task name"),
    ("heldout_benchmarks", {"heldout_tasks": ["gsm8k", "gsm8k"]}, "gsm8k named twice"),
    (
        "heldout_benchmarks",
        {"heldout_tasks": ["gsm8k"], "heldout_guard_tasks": ["gsm8k"]},
        "gsm8k named twice",
    ),
    ("heldout_benchmarks", {"heldout_guard_tasks": ["arc_easy"]}, "name one there too"),
    ("heldout_benchmarks", {"heldout_significance": 1.0}, "is not between 0 and 1"),
    (
        "champion_gains",
        {"min_gain_over_champion": {"accuracy": float("inf")}},
        "accuracy's minimum gain must be a finite number",
    ),
]


@pytest.mark.parametrize(("rule_name", "overrides", "expected"), RULE_CASES)
def test_rule_rejects_a_bad_setting(tutorial_conf, rule_name, overrides, expected):
    errors = errors_for(tutorial_conf, **overrides)
    assert any(expected in e for e in errors), errors
    rule = next(r for r in RULES if r.__name__ == rule_name)
    assert list(rule(RunSettings(**{**tutorial_conf, **overrides}))), (
        "the named rule itself flags it"
    )


def test_every_rule_has_a_case_and_there_are_at_least_twenty():
    assert len(RULES) >= 20
    assert {r.__name__ for r in RULES} == {case[0] for case in RULE_CASES}


def test_existing_cluster_needs_no_reservation(tutorial_conf):
    assert errors_for(tutorial_conf, cluster_mode="existing", reservation="") == []


def test_max_training_restarts_with_a_reservation_is_fine(tutorial_conf):
    assert errors_for(tutorial_conf, max_training_restarts=5) == []


@pytest.mark.parametrize(
    ("tpu_type", "topology", "trainer_ok"), [("v6e-16", "4x4", True), ("v6e-64", "8x8", True)]
)
def test_other_slice_sizes_validate(tutorial_conf, tpu_type, topology, trainer_ok):
    assert errors_for(tutorial_conf, tpu_type=tpu_type, topology=topology) == []
