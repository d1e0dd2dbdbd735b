"""Champion against challenger: the comparison, its setting and the evaluation Job's command (the
reward wait that keeps the backend for it: tests/unit/rewards/test_release.py)."""

from __future__ import annotations

import pytest

from tests.schemas import validate_manifest
from tests.support.comparison import CHAMPION, RECORD, REWARD, metrics
from tpu_rl.jobs import manifests as m
from tpu_rl.jobs import maxtext_flags as mf
from tpu_rl.layout import RunLayout
from tpu_rl.promotion.comparison import NO_CHAMPION, compare_with_champion
from tpu_rl.report.run_report import champion_lines
from tpu_rl.settings.run_settings import SettingsError, load_settings


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
