"""The reward gate: exports only on a real gain, and says why when the numbers are unusable."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tpu_rl.heldout.report import BASE as BASE_MODEL
from tpu_rl.heldout.report import HeldoutReport, heldout_report
from tpu_rl.promotion.gate import heldout_choice, heldout_gate, reward_gate

UNGATED = {"pre": None, "candidate": None, "gain": None, "min_gain": None, "passed": None}


def line(mean_reward):
    return {"corr": 1, "total": 4, "accuracy": 25.0, "mean_reward": mean_reward}


def test_a_gain_passes_and_reports_it():
    result = reward_gate({"pre": line(0.25), "post": line(0.5)}, 0.1)
    reward = {"pre": 0.25, "candidate": 0.5, "gain": 0.25, "min_gain": 0.1, "passed": True}
    assert result == {
        "pre_mean_reward": 0.25,
        "post_mean_reward": 0.5,
        "gain": 0.25,
        "candidate": "post-training",
        "metrics": {
            "accuracy": {**UNGATED, "pre": 25.0, "candidate": 25.0, "gain": 0.0},
            "partial_accuracy": UNGATED,
            "format_accuracy": UNGATED,
            "mean_reward": reward,
        },
    }


def test_too_small_a_gain_fails():
    with pytest.raises(AirflowFailException, match="below pre-training"):
        reward_gate({"pre": line(0.25), "post": line(0.3)}, 0.1)


@pytest.mark.parametrize("which", ["pre", "post"])
@pytest.mark.parametrize("bad", [None, float("nan"), "nan", float("inf"), "n/a"])
def test_a_nan_or_missing_mean_reward_fails_the_gate_clearly(which, bad):
    """The sensor turns `mean_reward=nan` into None (JSON); older MaxText prints none at all."""
    rewards = {"pre": line(0.25), "post": line(0.5)}
    rewards[which] = line(bad)
    with pytest.raises(AirflowFailException, match=f"the {which}-training line has no usable"):
        reward_gate(rewards, 0.0)


def test_a_line_without_the_field_fails_the_gate_clearly():
    post = line(0.5)
    del post["mean_reward"]
    with pytest.raises(AirflowFailException, match="post-training line has no usable"):
        reward_gate({"pre": line(0.25), "post": post}, 0.0)


def metrics(accuracy, format_accuracy, mean_reward):
    return {"accuracy": accuracy, "format_accuracy": format_accuracy, "mean_reward": mean_reward}


BASE = metrics(12.5, 80.0, 0.08)
FORMAT_ONLY = metrics(9.375, 96.875, 0.2)  # reward up by learning the format, accuracy down


def test_a_gate_on_accuracy_stops_a_reward_gain_that_lost_accuracy_and_tells_both_apart():
    rewards = {"pre": BASE, "post": FORMAT_ONLY}
    assert reward_gate(rewards, 0.0)["gain"] == pytest.approx(0.12)  # the default passes
    with pytest.raises(AirflowFailException) as stopped:
        reward_gate(rewards, 0.0, {"accuracy": 0, "mean_reward": 0.05})
    message = str(stopped.value)
    assert "post-training accuracy=9.375 is below pre-training accuracy=12.5 + 0" in message
    assert "(accuracy 12.5 -> 9.375, format_accuracy 80 -> 96.875)" in message
    assert "mean_reward=" not in message  # it passed


def test_a_negative_minimum_is_the_largest_loss_allowed():
    rewards = {"pre": BASE, "post": FORMAT_ONLY}
    passed = reward_gate(rewards, 0.0, {"accuracy": -5, "format_accuracy": 10})
    assert passed["metrics"]["accuracy"] == {
        "pre": 12.5,
        "candidate": 9.375,
        "gain": -3.125,
        "min_gain": -5,
        "passed": True,
    }
    assert passed["metrics"]["format_accuracy"]["passed"] is True
    assert passed["metrics"]["mean_reward"]["min_gain"] is None  # reported, not gated
    with pytest.raises(AirflowFailException, match=r"accuracy=9\.375 is below"):
        reward_gate(rewards, 0.0, {"accuracy": -3})


def test_the_gate_judges_the_checkpoint_to_export():
    step = metrics(11.0, 90.0, 0.15)
    rewards = {"pre": BASE, "post": FORMAT_ONLY}
    judged = reward_gate(rewards, 0.0, {"accuracy": -2}, ("step-30", step))
    assert judged["candidate"] == "step-30" and judged["post_mean_reward"] == 0.15
    with pytest.raises(AirflowFailException, match="step-30 accuracy=11 is below"):
        reward_gate(rewards, 0.0, {"accuracy": 0}, ("step-30", step))


@pytest.mark.parametrize("bad", [None, float("nan"), "n/a"])
def test_a_nan_or_missing_gated_metric_fails_clearly(bad):
    rewards = {"pre": BASE, "post": {**FORMAT_ONLY, "accuracy": bad}}
    with pytest.raises(AirflowFailException, match="the post-training line has no usable accuracy"):
        reward_gate(rewards, 0.0, {"accuracy": 0})
    del rewards["post"]["accuracy"]
    with pytest.raises(AirflowFailException, match="no usable accuracy"):
        reward_gate(rewards, 0.0, {"accuracy": 0})
    assert reward_gate(rewards, 0.0)["metrics"]["accuracy"]["candidate"] is None  # not gated


def heldout(base_right: int, candidate_right: int = 150) -> HeldoutReport:
    """A report of one step scored on 200 items against a base model."""

    def items(right: int) -> dict[str, bool]:
        return {f"{i}:h": i < right for i in range(200)}

    steps = {30: {"gsm8k": items(candidate_right)}}
    return heldout_report(steps, {BASE_MODEL: {"gsm8k": items(base_right)}}, ["gsm8k"], [], 0.05)


def test_the_heldout_gate_stops_only_a_significant_loss_against_the_base_model():
    passed = heldout_gate(heldout(120))
    assert passed["verdict"] == "better" and passed["step"] == 30
    assert passed["reasons"][0].startswith("gsm8k: better than the base model: 75.0% vs 60.0%")
    assert heldout_gate(heldout(148))["verdict"] == "not_distinguishable"  # 2 items: noise
    with pytest.raises(AirflowFailException, match="step 30 is worse against the base model"):
        heldout_gate(heldout(180))
    assert heldout_choice(heldout(120)) == (
        30,
        "held-out evaluation: the best score of the steps scored (step 30 75.0%)",
    )
