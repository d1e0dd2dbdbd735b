"""tpu_rl.operators.champion: the challenger's metrics are the exported step's evaluation, and
compare_champion's verdict skips the promotion of a challenger that loses."""

from __future__ import annotations

import pytest

from tests.support.heldout import GSM8K, heldout_xcom
from tpu_rl.layout import RunLayout
from tpu_rl.names import Step
from tpu_rl.operators.champion import (
    CHAMPION_XCOM,
    GENERATION_XCOM,
    METRICS_XCOM,
    CompareChampionOperator,
    challenger_metrics,
)
from tpu_rl.settings.run_settings import load_settings


def test_the_challenger_is_the_exported_steps_evaluation_else_the_post_line():
    rewards = {"pre": {"mean_reward": 0.08}, "post": {"mean_reward": 0.12}}
    exported = {"step": 40, "metrics": {"mean_reward": 0.15}, "choice": "best"}
    assert challenger_metrics(exported, rewards) == {"mean_reward": 0.15}
    assert challenger_metrics(None, rewards) == {"mean_reward": 0.12}
    assert challenger_metrics(None, None) is None


class ChampionTI:
    """The run's XComs before compare_champion, by (task id, key); what the step pushes."""

    def __init__(self, values: dict[tuple[str, str], object]) -> None:
        self.values, self.pushed = values, {}

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> object:
        return self.values.get((task_ids, key))

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


@pytest.fixture
def compare(tutorial_conf, monkeypatch) -> tuple[CompareChampionOperator, list]:
    """compare_champion on the tutorial's run (min_gain_over_champion {"mean_reward": 0}); the
    promotion steps it skipped, recorded."""
    step = CompareChampionOperator()
    layout = RunLayout(load_settings(tutorial_conf), "manual__c", "dep")
    monkeypatch.setattr(step, "run_layout", lambda context: layout)
    skipped: list[bool] = []
    monkeypatch.setattr(step, "skip_promotion", lambda context: skipped.append(True))
    return step, skipped


EXPORTED = (Step.EXPORT, "return_value")


def test_the_first_champion_is_compared_with_nothing_and_nothing_is_skipped(compare):
    step, skipped = compare
    ti = ChampionTI({EXPORTED: {"metrics": {"mean_reward": 0.3}}})
    result = step.execute({"ti": ti})
    assert result["beats"] and result["champion_generation"] == 0 and skipped == []


def test_a_challenger_that_loses_is_pushed_then_skips_promotion(compare):
    step, skipped = compare
    ti = ChampionTI(
        {
            EXPORTED: {"metrics": {"mean_reward": 0.1}},
            (Step.EVALUATE_CHAMPION, CHAMPION_XCOM): {"run_id": "r0", "export_uri": "gs://b/0/"},
            (Step.EVALUATE_CHAMPION, METRICS_XCOM): {"mean_reward": 0.2},
            (Step.EVALUATE_CHAMPION, GENERATION_XCOM): 7,
        }
    )
    result = step.execute({"ti": ti})
    assert not result["beats"] and result["champion_generation"] == 7
    assert ti.pushed == {"return_value": result} and skipped == [True]


def test_compare_runs_when_evaluate_champion_skipped():
    assert CompareChampionOperator().trigger_rule == "none_failed"


def test_a_challenger_the_trainer_favours_is_not_promoted_when_heldout_cannot_tell(
    compare, tutorial_conf, monkeypatch
):
    """The trainer's numbers beat the champion; the held-out items show no difference: the
    comparison says so, and promotion is skipped."""
    step, skipped = compare
    conf = {**tutorial_conf, "heldout_tasks": ["gsm8k"]}
    layout = RunLayout(load_settings(conf), "manual__c", "dep")
    monkeypatch.setattr(step, "run_layout", lambda context: layout)
    ti = ChampionTI(
        {
            EXPORTED: {"metrics": {"mean_reward": 0.3}},
            (Step.EVALUATE_CHAMPION, CHAMPION_XCOM): {"run_id": "r0", "export_uri": "gs://b/0/"},
            (Step.EVALUATE_CHAMPION, METRICS_XCOM): {"mean_reward": 0.2},
            (Step.EVALUATE_HELDOUT, "return_value"): heldout_xcom(GSM8K),
        }
    )
    result = step.execute({"ti": ti})
    assert not result["beats"] and skipped == [True]
    assert result["heldout_verdict"] == "not_distinguishable"
    assert result["reason"].startswith(
        "not promoted: not distinguishable from the champion from run r0 on the held-out items"
    )
    assert result["trainer_reason"].startswith("beats the champion from run r0")
