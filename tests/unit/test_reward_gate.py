"""The reward gate: exports only on a real gain, and says why when the numbers are unusable."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from tpu_rl.rewards.gate import reward_gate


def line(mean_reward):
    return {"corr": 1, "total": 4, "accuracy": 25.0, "mean_reward": mean_reward}


def test_a_gain_passes_and_reports_it():
    result = reward_gate({"pre": line(0.25), "post": line(0.5)}, 0.1)
    assert result == {"pre_mean_reward": 0.25, "post_mean_reward": 0.5, "gain": 0.25}


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
