"""The hold on reward hacking (tpu_rl.heldout.hold): by completion length, judged on the curves
of the real Tunix GRPO runs (sandbox/corpus) and on drawn ones; by the held-out evaluation's
guards and verdict against the base model."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from sandbox.trainer_corpus import runs
from tests.support.heldout import GSM8K, GSM8K_WORSE, MMLU_FELL, heldout
from tpu_rl.heldout.hold import MIN_POINTS, heldout_hold, joined, length_drift_hold, trend
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


STEADY = [300.0] * 40  # a completion length that does not move


def test_a_guard_benchmark_that_fell_below_the_base_model_holds_whatever_the_reward_did():
    report = heldout(GSM8K, MMLU_FELL)
    for found in (drawn(RISING, STEADY), drawn(RISING[::-1], STEADY), None):
        hold = heldout_hold(report, found)
        assert hold is not None
        assert hold.reason == (
            "step 100 answers guard benchmark mmlu significantly worse than the base model: a "
            "capability the reward never scored, lost"
        )
        [evidence] = hold.evidence
        assert evidence.startswith("guard mmlu: worse than the base model: 62.0% vs 68.0% on 500")


def test_a_verdict_worse_than_the_base_model_holds_only_while_the_reward_rose():
    report = heldout(GSM8K_WORSE)
    hold = heldout_hold(report, drawn(RISING, STEADY))
    assert hold is not None
    assert hold.reason == (
        "the training reward rose while step 100 answers held-out benchmark gsm8k significantly "
        "worse than the base model: a sign of reward hacking"
    )
    reward, gsm8k = hold.evidence
    assert reward.startswith("batch reward (rewards/train/score/mean) 0.145 -> 0.445")
    assert gsm8k.startswith("gsm8k: worse than the base model: 56.0% vs 64.0% on 1000 items")
    assert heldout_hold(report, drawn(RISING[::-1], STEADY)) is None  # the reward fell
    assert heldout_hold(report, None) is None  # no curve: the reward's move is not known
    # judged on the exported checkpoint's training only: the reward fell before step 20
    later = drawn([0.5 - 0.01 * i for i in range(20)] + [1.0] * 20, STEADY)
    assert heldout_hold(report, later) is not None
    assert heldout_hold(report, later, exported_step=20) is None


def test_no_held_out_hold_without_a_report_or_with_nothing_fallen():
    assert heldout_hold(None, drawn(RISING, STEADY)) is None  # held-out evaluation off
    assert heldout_hold(heldout(GSM8K), drawn(RISING, STEADY)) is None


def test_holds_found_together_keep_each_reason_and_all_evidence():
    tripled = [300.0 * (1 + 2 * i / 39) for i in range(40)]
    found = drawn(RISING, tripled)
    length = length_drift_hold(found, 2.0)
    guard = heldout_hold(heldout(MMLU_FELL), found)
    assert length is not None and guard is not None
    both = joined(length, None, guard)
    assert both is not None
    assert both.reason == f"{length.reason}; {guard.reason}"
    assert both.evidence == (*length.evidence, *guard.evidence)
    assert joined(None, None) is None and joined(guard) == guard
