"""tpu_rl.settings.run_settings: loading a run's settings: types, unknown keys, every error at
once, settings files."""

from __future__ import annotations

import json

import pytest

from tests.support.settings import errors_for
from tpu_rl.settings.run_settings import (
    SETTING_FIELDS,
    RunSettings,
    SettingsError,
    load_settings,
    load_settings_file,
)
from tpu_rl.tpu import GENERATIONS, Slice


def test_tutorial_settings_are_valid_and_defaults_are_the_tutorials(tutorial_conf):
    s = load_settings(tutorial_conf)
    assert (s.tpu_type, s.topology, s.compute_type, s.chips) == (
        "v6e-32",
        "4x8",
        "ct6e-standard-4t",
        32,
    )
    assert (s.num_batches, s.batch_size, s.train_micro_batch_size) == (50, 4, 2)
    assert s.learning_rate == 2e-5 and s.rl_num_generations == 4 and s.optimizer == "adafactor"
    assert s.cluster_toolkit_version == "v1.103.0"


def test_the_runs_slices_are_its_node_pools_of_its_tpu_type_and_topology():
    s = RunSettings(tpu_type="tpu7x-128", topology="4x4x4", cluster_nodepool_count=2)
    assert s.slices == Slice(GENERATIONS["tpu7x"], "4x4x4", 2)
    assert (s.slices.chips, s.slices.hosts, s.slices.devices) == (128, 32, 256)


def test_choices_are_enum_members_that_compare_as_their_values(tutorial_conf):
    s = load_settings({**tutorial_conf, "capacity": "spot", "reservation": ""})
    assert s.capacity == "spot" and type(s.capacity).__name__ == "Capacity"
    assert (
        s.cluster_mode == "create"
        and RunSettings(cluster_mode="existing").cluster_mode == "existing"
    )
    assert type(s.to_dict()["capacity"]) is str


def test_unknown_key_is_an_error_naming_the_closest_setting(tutorial_conf):
    assert errors_for(tutorial_conf, num_batchs=10) == [
        "num_batchs: unknown setting (did you mean num_batches?)"
    ]
    assert errors_for(tutorial_conf, learningrate=0.1) == [
        "learningrate: unknown setting (did you mean learning_rate?)"
    ]
    assert errors_for(tutorial_conf, colour="red") == [
        "colour: unknown setting (known: see docs/settings.md)"
    ]


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("num_batches", "50", "must be an integer"),
        ("num_batches", True, "must be an integer"),
        ("learning_rate", "2e-5", "must be a number"),
        ("keep_cluster", "yes", "must be a boolean"),
        ("extra_train_args", "a=b", "must be a list of strings"),
        ("project", 5, "must be a string"),
    ],
)
def test_wrong_types_are_named(tutorial_conf, name, value, expected):
    assert any(
        e.startswith(f"{name}: {expected}") for e in errors_for(tutorial_conf, **{name: value})
    )


def test_ints_are_accepted_where_numbers_are_expected(tutorial_conf):
    assert load_settings({**tutorial_conf, "min_reward_gain": 1}).min_reward_gain == 1.0


def test_all_errors_are_reported_at_once(tutorial_conf):
    errors = errors_for(
        tutorial_conf, cluster_name="Bad_Name", zone="europe-west4-a", batch_size=3, bogus=1
    )
    assert len(errors) == 4
    joined = "\n".join(errors)
    for name in ("bogus", "cluster_name", "zone", "train_micro_batch_size"):
        assert f"{name}:" in joined


@pytest.mark.parametrize(
    ("key", "variable"),
    [("hf_conn_id", "TPU_RL_HF_CONN_ID"), ("gcp_conn_id", "TPU_RL_GCP_CONN_ID")],
)
def test_a_run_cannot_choose_the_connections(tutorial_conf, key, variable):
    """Whoever may trigger must not pick whose password goes into the cluster."""
    errors = errors_for(tutorial_conf, **{key: "some_database"})
    assert errors == [f"{key}: set by the deployer ({variable}), not by a run"]
    assert key not in SETTING_FIELDS


def test_settings_file_errors(tmp_path, tutorial_conf):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SettingsError, match="not valid JSON"):
        load_settings_file(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(tutorial_conf))
    assert load_settings_file(good).cluster_name == "gemma4-rl"


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**63])
def test_huge_integers_are_settings_errors_for_every_int_setting(tutorial_conf, value):
    """Never an OverflowError (or a 400-digit message) from anywhere in validation."""
    for name, f in SETTING_FIELDS.items():
        if str(f.type) == "int" or (str(f.type) == "float" and abs(value) > 2**1023):
            errors = errors_for(tutorial_conf, **{name: value})
            assert errors and all(len(e) < 300 for e in errors), (name, errors)
            assert any(e.startswith(f"{name}: must be") for e in errors), (name, errors)


def test_a_json_file_with_an_integer_past_pythons_digit_limit_is_a_settings_error(tmp_path):
    bad = tmp_path / "huge.json"
    bad.write_text('{"num_batches": ' + "9" * 5000 + "}")
    with pytest.raises(SettingsError, match="not valid JSON"):
        load_settings_file(bad)


def test_every_problem_of_a_file_is_reported_in_one_pass(tutorial_conf):
    """A file with out-of-bounds integers, unsafe text and rule breaks: one `make plan` pass
    lists them all (not the bounds first, then the rules), and no rule speaks of the default a
    bad value was replaced by."""
    errors = errors_for(
        tutorial_conf,
        num_batches=-5,
        cluster_nodepool_count=0,
        data_template_path="a\x1b[2J",
        learning_rate=-0.1,
        zone="us-west1-b",
        project="My_Project",
    )
    named = [e.partition(":")[0] for e in errors]
    assert set(named) == {
        "num_batches",
        "cluster_nodepool_count",
        "data_template_path",
        "learning_rate",
        "zone",
        "project",
    }, errors
    assert not any("got 50" in e or "num_batches 50" in e for e in errors), errors
