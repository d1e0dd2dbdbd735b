"""The evaluation settings: gate_metrics (a JSON object of metric -> minimum gain), and the
warning validate gives when export_checkpoint=best has no step to choose but the last."""

from __future__ import annotations

import jsonschema
import pytest

from tpu_rl.settings.choices import EVAL_METRICS, EvalMetric
from tpu_rl.settings.eval_rules import best_checkpoint_warnings
from tpu_rl.settings.params import specs
from tpu_rl.settings.run_settings import SettingsError, load_settings


def test_gate_metrics_default_to_mean_reward_by_min_reward_gain(tutorial_conf):
    s = load_settings(tutorial_conf)
    assert s.gate_metrics == {} and s.export_checkpoint == "last" and s.best_metric == "mean_reward"
    assert load_settings({**tutorial_conf, "gate_metrics": None}).gate_metrics == {}


def test_gate_metrics_name_known_metrics_with_numbers(tutorial_conf):
    good = {"accuracy": 0, "format_accuracy": -5.5, "mean_reward": 0.01}
    assert load_settings({**tutorial_conf, "gate_metrics": good}).gate_metrics == good
    with pytest.raises(SettingsError) as bad:
        load_settings({**tutorial_conf, "gate_metrics": {"acuracy": 0}})
    assert "gate_metrics: 'acuracy' is not an evaluation metric (known: accuracy," in str(bad.value)
    with pytest.raises(SettingsError, match="gate_metrics: must be an object of numbers"):
        load_settings({**tutorial_conf, "gate_metrics": {"accuracy": "high"}})
    with pytest.raises(SettingsError, match="gate_metrics: must be an object of numbers"):
        load_settings({**tutorial_conf, "gate_metrics": ["accuracy"]})


def test_the_form_checks_gate_metrics_as_the_settings_do():
    schema = specs()["gate_metrics"]
    jsonschema.validate({"accuracy": 1, "mean_reward": -0.1}, schema)
    for bad in ({"acuracy": 1}, {"accuracy": "1"}, ["accuracy"]):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert set(EvalMetric) == set(EVAL_METRICS) == set(specs()["best_metric"]["enum"])


@pytest.mark.parametrize(
    ("conf", "warned"),
    [
        ({}, False),  # export_checkpoint=last: nothing to choose
        ({"export_checkpoint": "best"}, True),  # 10 and 25: only 50, the last step
        ({"export_checkpoint": "best", "checkpoint_period": 10}, False),
        ({"export_checkpoint": "best", "extra_train_args": ["eval_interval=25"]}, False),
        ({"export_checkpoint": "best", "extra_train_args": ["eval_interval=0"]}, True),
    ],
)
def test_validate_warns_when_best_has_only_the_last_step(tutorial_conf, conf, warned):
    s = load_settings({**tutorial_conf, **conf})
    assert bool(best_checkpoint_warnings(s)) is warned


def test_the_warning_says_which_values_would_give_a_step(tutorial_conf):
    s = load_settings({**tutorial_conf, "export_checkpoint": "best"})
    (warning,) = best_checkpoint_warnings(s)
    assert "eval_interval=10 and checkpoint_period=25, no step before the last (50)" in warning
    assert "checkpoint_period=40 or extra_train_args eval_interval=25 would give one" in warning
    for fix in ({"checkpoint_period": 40}, {"extra_train_args": ["eval_interval=25"]}):
        assert (
            best_checkpoint_warnings(load_settings({**tutorial_conf, **s.to_dict(), **fix})) == []
        )
