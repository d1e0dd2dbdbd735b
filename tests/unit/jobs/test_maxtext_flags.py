"""MaxText's command lines for a run (tpu_rl.jobs.maxtext_flags): the tutorial's flags with the
run's own names and paths, the champion's evaluation, the shell line."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from tests.tutorial_text import as_mapping, same_value, tutorial_python_flags
from tpu_rl.jobs import maxtext_flags as mf
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

RUN_ID = "manual__2026-11-29T10:00:00+00:00"


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    return RunLayout(load_settings(tutorial_conf), RUN_ID, "test-deployment")


def tutorial_vars(tutorial_conf: dict) -> dict[str, str]:
    return {
        "MODEL_NAME": tutorial_conf["model_name"],
        "GCS_BUCKET": tutorial_conf["gcs_bucket"],
        "HF_TOKEN": "${HF_TOKEN}",
    }


def test_conversion_flags_match_the_tutorial(layout, tutorial_conf):
    ours = mf.conversion_flags(layout)
    theirs = tutorial_python_flags(
        "maxtext.checkpoint_conversion.to_maxtext", tutorial_vars(tutorial_conf)
    )
    assert [f.split("=")[0] for f in ours] == [f.split("=")[0] for f in theirs]
    # the converted model's folder is keyed by what changes its layout
    keyed = {"base_output_directory"}
    for key, value in as_mapping(theirs).items():
        if key not in keyed:
            assert same_value(as_mapping(ours)[key], value), key
    tutorial_dir = as_mapping(theirs)["base_output_directory"].rstrip("/")
    assert as_mapping(ours)["base_output_directory"] == f"{tutorial_dir}/{layout.maxtext_key}/"


def test_training_flags_match_the_tutorial_but_for_the_runs_own_name(layout, tutorial_conf):
    ours = as_mapping(mf.train_flags(layout))
    theirs = as_mapping(
        tutorial_python_flags(
            "maxtext.trainers.post_train.rl.train_rl", tutorial_vars(tutorial_conf)
        )
    )
    # checkpoint_period: the tutorial leaves rl.yml's 50 (its last step only); the run passes
    # 25, a checkpoint to resume from
    assert set(ours) == set(theirs) | {"checkpoint_period"}
    assert ours["checkpoint_period"] == "25"
    assert theirs["run_name"] == "rl" and ours["run_name"] == layout.slug
    for key in set(theirs) - {"run_name", "load_parameters_path"}:
        assert same_value(ours[key], theirs[key]), (key, ours[key], theirs[key])
    # the converted model's folder is keyed by what changes its layout
    tutorial_dir = theirs["load_parameters_path"].removesuffix("/").removesuffix("0/items")
    assert ours["load_parameters_path"] == f"{tutorial_dir}{layout.maxtext_key}/0/items/"


def test_export_flags_match_the_tutorial_with_per_run_paths(layout, tutorial_conf):
    ours = as_mapping(mf.export_flags(layout, 50))
    theirs = as_mapping(
        tutorial_python_flags(
            "maxtext.checkpoint_conversion.to_huggingface", tutorial_vars(tutorial_conf)
        )
    )
    assert set(ours) == set(theirs)
    per_run = {"load_parameters_path", "base_output_directory"}
    for key in set(theirs) - per_run:
        assert same_value(ours[key], theirs[key]), key
    assert ours["load_parameters_path"] == theirs["load_parameters_path"].replace(
        "/trained/rl/", f"/trained/{layout.slug}/"
    )
    assert ours["base_output_directory"] == theirs["base_output_directory"] + layout.slug + "/"


def test_extra_train_args_are_appended(tutorial_conf):
    layout = RunLayout(
        load_settings({**tutorial_conf, "extra_train_args": ["num_test_batches=8"]}),
        RUN_ID,
        "test-deployment",
    )
    assert mf.train_flags(layout)[-1] == "num_test_batches=8"


def test_the_evaluation_runs_the_runs_own_flags_on_the_champion_without_training(tutorial_conf):
    conf = {**tutorial_conf, "extra_train_args": ["train_fraction=0.5", "num_epoch=1"]}
    layout = RunLayout(load_settings(conf), "manual__2026-12-03", "test-deployment")
    params = "gs://b/gemma4-26b/trained/rl-old/checkpoints/actor/50/model_params/"
    flags = mf.champion_evaluation_flags(layout, params)
    keys = [f.split("=", 1)[0] for f in flags]
    assert len(keys) == len(set(keys))  # no flag given twice, extra_train_args' neither
    values = dict(f.split("=", 1) for f in flags)
    assert values["run_name"] == f"{layout.slug}-champion" != layout.slug
    assert values["load_parameters_path"] == params
    assert values["base_output_directory"] == layout.trained_dir
    train = dict(f.split("=", 1) for f in mf.train_flags(layout))
    assert {k: train[k] for k in train if k not in mf.EVALUATION_OVERRIDES} == {
        k: values[k] for k in values if k not in mf.EVALUATION_OVERRIDES
    }  # the evaluation set, its batches and the sampling are the run's
    # MaxText's train_steps and training examples are 0 even at the settings' largest values
    fraction = float(values["train_fraction"])
    assert fraction > 0 and int(10_000_000 * 65_536 * fraction) == 0


def test_the_evaluation_loads_a_checkpoints_parameters_from_its_step_or_its_parameters():
    step = "gs://b/m/trained/rl-old/checkpoints/actor/50"
    assert mf.checkpoint_parameters(step) == f"{step}/model_params/"
    assert mf.checkpoint_parameters(f"{step}/") == f"{step}/model_params/"
    assert mf.checkpoint_parameters(f"{step}/model_params/") == f"{step}/model_params/"


def test_a_float_flag_is_in_short_form_and_others_as_they_are():
    assert mf.flag("learning_rate", 3e-06) == "learning_rate=3e-06"
    assert mf.flag("train_fraction", 1.0) == "train_fraction=1"
    assert mf.flag("scan_layers", False) == "scan_layers=False"


def test_a_revision_other_than_main_is_converted_by_name(tutorial_conf):
    pinned = {**tutorial_conf, "hf_revision": "abc123"}
    flags = mf.conversion_flags(RunLayout(load_settings(pinned), RUN_ID, "d"))
    assert flags[3] == "--revision=abc123" and flags[2].startswith("--hf_model_path=")


@pytest.mark.parametrize(
    ("overrides", "adapter"),
    [
        ('{"architectures": ["MaxTextForCausalLM"]}', True),
        ('{"architectures": "MaxTextForCausalLM"}', True),
        ('{"architectures": ["Gemma3ForCausalLM"]}', False),
        ("{}", False),
        ("not json", False),
        ("[1]", False),
    ],
)
def test_the_maxtext_adapter_is_what_the_overrides_name(overrides, adapter):
    assert mf.uses_maxtext_adapter(overrides) is adapter


def test_the_vllm_config_is_given_with_maxtexts_model_only(layout):
    settings = layout.settings
    adapter = '{"architectures": ["MaxTextForCausalLM"]}'
    with_adapter = dataclasses.replace(settings, vllm_hf_overrides=adapter)
    without = dataclasses.replace(settings, vllm_hf_overrides="{}")
    (given,) = mf.adapter_flags(RunLayout(with_adapter, RUN_ID, "d"))
    assert given.startswith("vllm_additional_config={'maxtext_config': {'model_name': ")
    assert "'weight_dtype': '" in given and given.endswith("}}")
    assert mf.adapter_flags(RunLayout(without, RUN_ID, "d")) == []


def test_the_shell_line_quotes_each_flag_and_reads_the_token_from_the_environment():
    line = mf.python_command("m.train", ["a=b c", mf.TOKEN_FLAG, "run_name=x"])
    assert line == "python3 -m m.train 'a=b c' hf_access_token=\"${HF_TOKEN}\" run_name=x"
    assert shlex.split(line)[3] == "a=b c"
