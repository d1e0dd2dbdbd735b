"""The hold on reward hacking by completion length (tpu_rl.heldout.hold): judged on the curves of
the real Tunix GRPO runs (sandbox/corpus) and on drawn ones."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from sandbox.trainer_corpus import runs
from tpu_rl.heldout.hold import MIN_POINTS, length_drift_hold, trend
from tpu_rl.settings.params import default_settings
from tpu_rl.watch import curves


class Scalar(NamedTuple):
    tag: str
    step: int
    value: float


def drawn(rewards: list[float], lengths: list[float]) -> dict:
    scalars = [Scalar(curves.REWARD_MEAN, i, r) for i, r in enumerate(rewards)]
    scalars += [Scalar(curves.LENGTH, i, n) for i, n in enumerate(lengths)]
    found = curves.record(None, scalars)
    assert found is not None
    return found


RISING = [0.1 + 0.01 * i for i in range(40)]


def corpus_curves(run) -> dict:
    scalars = [
        Scalar(tag, step, value)
        for tag in (curves.REWARD_MEAN, curves.LENGTH)
        for step, value in run.series(tag)
    ]
    found = curves.record(None, scalars)
    assert found is not None, run.name
    return found


def test_no_real_run_without_a_fault_is_held_at_the_default_drift():
    drift = default_settings().hold_length_drift
    ratios = {}
    for run in runs():
        if run.fault is None:
            found = corpus_curves(run)
            assert length_drift_hold(found, drift) is None, run.name
            length = trend(found, curves.LENGTH)
            assert length is not None, run.name
            ratios[run.name] = round(length.ratio, 2)
    assert len(ratios) >= 8 and max(ratios.values()) < drift, ratios  # 0.98 to 1.44 today


def test_the_real_overflow_fault_whose_completions_emptied_is_held():
    """Tunix's run with an overflowing learning rate: its batch reward had risen when its
    completions shrank to nothing (the watchdog stops it on its nan loss first)."""
    [overflow] = [run for run in runs() if run.name == "fault-overflow"]
    hold = length_drift_hold(corpus_curves(overflow), default_settings().hold_length_drift)
    assert hold is not None
    assert hold.evidence[1].endswith("7.625 tokens -> 0 tokens from step 0 to 39"), hold
    assert "completion length shrank to nothing" in hold.reason


@pytest.mark.parametrize(
    "end_length", [930.0, 95.0]
)  # 3.1 times longer, 3.2 times shorter at the end
def test_a_rising_reward_with_the_length_moved_past_the_drift_is_held(end_length):
    lengths = [300.0 + (end_length - 300.0) * i / 39 for i in range(40)]
    hold = length_drift_hold(drawn(RISING, lengths), 2.0)
    assert hold is not None
    moved = "grew 2.3 times" if end_length > 300 else "shrank 2.3 times"
    assert hold.reason.startswith(f"the training reward rose while the completion length {moved}")
    assert "past hold_length_drift 2: a sign of reward hacking" in hold.reason
    reward, length = hold.evidence
    assert reward.startswith("batch reward (rewards/train/score/mean) 0.145 -> 0.445")
    assert length.startswith("completion length (completions/train/mean_length) ")
    assert length.endswith(" tokens from step 0 to 39")


def test_no_hold_when_the_reward_fell_the_length_stayed_the_rule_is_off_or_too_few_points():
    tripled = [300.0 * (1 + 2 * i / 39) for i in range(40)]
    assert length_drift_hold(drawn(RISING[::-1], tripled), 2.0) is None  # reward fell
    assert length_drift_hold(drawn(RISING, [300.0 + i for i in range(40)]), 2.0) is None
    assert length_drift_hold(drawn(RISING, tripled), 0) is None  # off
    short = MIN_POINTS - 1
    assert length_drift_hold(drawn(RISING[:short], tripled[:short]), 2.0) is None
    assert length_drift_hold(None, 2.0) is None


def test_only_the_training_of_the_exported_checkpoint_is_judged():
    """A NaN at update 35 fills the completions with garbage (1024 tokens) after the healthy
    checkpoint of step 30 that export_healthy exports: its rollouts are TensorBoard steps 0-29."""
    lengths = [300.0] * 35 + [1024.0] * 5
    rewards = RISING[:35] + [0.0] * 5
    assert length_drift_hold(drawn(rewards, lengths), 2.0) is not None  # the whole run's curves
    assert length_drift_hold(drawn(rewards, lengths), 2.0, exported_step=30) is None
