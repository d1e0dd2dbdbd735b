"""Champion against challenger: the comparison, its setting and the evaluation Job's command (the
reward wait that keeps the backend for it: tests/unit/rewards/test_release.py)."""

from __future__ import annotations

import math

import pytest

from tests.schemas import validate_manifest
from tpu_rl.jobs import manifests as m
from tpu_rl.jobs import maxtext_flags as mf
from tpu_rl.layout import RunLayout
from tpu_rl.operators.champion import challenger_metrics
from tpu_rl.promotion.comparison import NO_CHAMPION, compare_with_champion
from tpu_rl.report.run_report import champion_lines
from tpu_rl.settings.run_settings import SettingsError, load_settings

RECORD = {"run_id": "scheduled__2026-11-26", "export_uri": "gs://b/m/hf-trained/rl-old/"}
CHAMPION = {"accuracy": 20.0, "format_accuracy": 90.0, "mean_reward": 0.2}
REWARD = {"mean_reward": 0.0}


def metrics(**values: float | None) -> dict[str, float | None]:
    return {**CHAMPION, **values}


def test_the_first_run_has_no_champion_to_beat():
    result = compare_with_champion(None, None, metrics(mean_reward=0.1), REWARD)
    assert result["beats"] and result["reason"] == NO_CHAMPION
    assert result["champion"] is None and result["champion_metrics"] is None


def test_a_challenger_that_beats_its_base_can_still_lose_to_the_champion():
    result = compare_with_champion(RECORD, CHAMPION, metrics(mean_reward=0.1234), REWARD)
    assert not result["beats"]
    assert result["reason"] == (
        "not promoted: loses to the champion from run scheduled__2026-11-26: "
        "mean_reward 0.1234 vs champion 0.2 (needs +0)"
    )
    assert result["champion"] == RECORD and result["champion_metrics"] == CHAMPION


def test_every_named_metric_must_clear_its_gain_and_a_tie_with_gain_0_beats():
    gains = {"mean_reward": 0.0, "accuracy": 1.0}
    tie = compare_with_champion(RECORD, CHAMPION, metrics(accuracy=21.0), gains)
    assert tie["beats"] and tie["reason"].startswith("beats the champion from run")
    short = compare_with_champion(RECORD, CHAMPION, metrics(accuracy=20.5), gains)
    assert not short["beats"] and "accuracy 20.5 vs champion 20 (needs +1)" in short["reason"]
    assert "mean_reward" not in short["reason"]  # only the shortfalls are named


def test_a_negative_gain_is_the_loss_allowed():
    gains = {"format_accuracy": -5.0}
    assert compare_with_champion(RECORD, CHAMPION, metrics(format_accuracy=85.0), gains)["beats"]
    assert not compare_with_champion(RECORD, CHAMPION, metrics(format_accuracy=84.9), gains)[
        "beats"
    ]


@pytest.mark.parametrize(
    ("champion", "challenger", "named"),
    [
        (CHAMPION, metrics(mean_reward=None), "mean_reward for the challenger (got None)"),
        (metrics(mean_reward=math.nan), CHAMPION, "mean_reward for the champion (got nan)"),
        ({"accuracy": 20.0}, CHAMPION, "mean_reward for the champion (got None)"),
    ],
)
def test_a_missing_or_nan_metric_is_not_promoted_and_says_which(champion, challenger, named):
    result = compare_with_champion(RECORD, champion, challenger, REWARD)
    assert not result["beats"] and result["reason"] == f"not promoted: no usable {named}"


def test_the_challenger_is_the_exported_steps_evaluation_else_the_post_line():
    rewards = {"pre": {"mean_reward": 0.08}, "post": {"mean_reward": 0.12}}
    exported = {"step": 40, "metrics": {"mean_reward": 0.15}, "choice": "best"}
    assert challenger_metrics(exported, rewards) == {"mean_reward": 0.15}
    assert challenger_metrics(None, rewards) == {"mean_reward": 0.12}
    assert challenger_metrics(None, None) is None


def test_min_gain_over_champion_is_checked_when_the_run_is_validated(tutorial_conf):
    assert load_settings(tutorial_conf).min_gain_over_champion == {"mean_reward": 0.0}
    chosen = load_settings({**tutorial_conf, "min_gain_over_champion": {"accuracy": 2}})
    assert chosen.min_gain_over_champion == {"accuracy": 2.0}
    cases = {
        "format": ({"accuracy": "2"}, "must be an object of numbers"),
        "a list": (["accuracy"], "must be an object of numbers"),
        "unknown": ({"loss": 0.1}, "'loss' is not an evaluation metric"),
        "empty": ({}, "name at least one metric"),
    }
    for value, message in cases.values():
        with pytest.raises(SettingsError) as raised:
            load_settings({**tutorial_conf, "min_gain_over_champion": value})
        assert message in str(raised.value), (value, str(raised.value))


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    conf = {**tutorial_conf, "extra_train_args": ["train_fraction=0.5", "num_epoch=1"]}
    return RunLayout(load_settings(conf), "manual__2026-12-03", "test-deployment")


def test_the_evaluation_runs_the_runs_own_flags_on_the_champion_without_training(layout):
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


def test_the_evaluation_job_is_a_client_of_the_runs_backend(layout):
    params = "gs://b/m/trained/rl-old/checkpoints/actor/50/model_params/"
    job, train = m.champion_evaluation_job(layout, params), m.train_job(layout)
    validate_manifest(job)
    assert job["metadata"]["name"] == layout.job_names["champion"]
    minutes = layout.settings.champion_eval_timeout_minutes
    assert job["spec"]["activeDeadlineSeconds"] == minutes * 60
    container, client = (
        job["spec"]["template"]["spec"]["containers"][0],
        train["spec"]["template"]["spec"]["containers"][0],
    )
    assert container["env"] == client["env"]  # JAX_BACKEND_TARGET: the run's Pathways proxy
    assert f"load_parameters_path={params}" in container["command"][-1]
    assert f"train_fraction={mf.NO_TRAINING_FRACTION:g}" in container["command"][-1]


def test_the_run_report_shows_the_verdict_and_both_sides():
    result = compare_with_champion(RECORD, CHAMPION, metrics(mean_reward=0.1234), REWARD)
    lines = champion_lines(result)
    assert lines[:4] == ["", "## Champion", "", result["reason"]]
    assert "| mean_reward | 0.200 | 0.123 |" in lines and "| accuracy | 20.00 | 20.00 |" in lines
    first = champion_lines(compare_with_champion(None, None, CHAMPION, REWARD))
    assert first == ["", "## Champion", "", NO_CHAMPION]
    assert champion_lines(None) == []
