"""The sandbox's modelled training curve against the corpus of real GRPO runs: the
curve the e2e scenarios train on must look like what Tunix's real trainer logs, or the
watchdog is proven on a picture. Each figure of the curve lies within the range the real
healthy runs span; the sandbox's injected faults take the real faults' values."""

from __future__ import annotations

import math
import statistics

import pytest

from sandbox.trainer_corpus import runs
from sandbox.training_curve import LR_COLLAPSE_LOSS, TrainingCurve, TrainingFaults

pytestmark = pytest.mark.unit

HEALTHY = [r for r in runs() if r.fault is None]
SEEDS = range(5)
STEPS = range(1, 201)


def _corpus(figure) -> tuple[float, float]:
    values = [figure(r.losses()) for r in HEALTHY]
    return min(values), max(values)


def _negative_share(losses: list[float]) -> float:
    return sum(x < 0 for x in losses) / len(losses)


def _median_magnitude(losses: list[float]) -> float:
    return statistics.median(abs(x) for x in losses)


def _largest_magnitude(losses: list[float]) -> float:
    return max(abs(x) for x in losses)


@pytest.mark.parametrize(
    "figure", [_negative_share, _median_magnitude, _largest_magnitude], ids=lambda f: f.__name__
)
def test_the_sandbox_loss_lies_within_the_real_runs(figure):
    low, high = _corpus(figure)
    for seed in SEEDS:
        curve = TrainingCurve(seed=seed)
        value = figure([curve.loss(step) for step in STEPS])
        assert low <= value <= high, (figure.__name__, seed, value, (low, high))


def test_the_sandbox_reward_rises_as_the_real_ones_do():
    """Most real runs end with a higher batch reward than they started with."""
    rising = [
        statistics.mean(v for _, v in r.series("rewards/train/score/mean")[-5:])
        > statistics.mean(v for _, v in r.series("rewards/train/score/mean")[:5])
        for r in HEALTHY
    ]
    assert sum(rising) > len(rising) / 2
    curve = TrainingCurve()
    assert statistics.mean(map(curve.reward, range(195, 200))) > statistics.mean(
        map(curve.reward, range(1, 6))
    )


def test_the_sandbox_kl_starts_near_zero_as_the_real_kl_does():
    first = [r.series("actor/train/kl")[0][1] for r in HEALTHY]
    assert max(abs(v) for v in first) < 1e-6  # the policy starts as the reference
    assert abs(TrainingCurve().kl(1)) < 0.01


def test_the_sandbox_faults_take_the_real_faults_values():
    diverged = next(r for r in runs() if r.name == "fault-lr-collapse")
    assert LR_COLLAPSE_LOSS in diverged.losses()
    blowup = next(r for r in runs() if r.name == "fault-kl-blowup")
    at = blowup.fault["step"]
    real_after = {v for s, v in blowup.series("rewards/train/score/max") if s >= at + 1}
    assert real_after == {0.0}  # every completion scores 0 once the policy left
    curve = TrainingCurve(faults=TrainingFaults(kl_blowup_at_step=20))
    assert {curve.reward(step) for step in range(21, 60)} == {0.0}
    assert math.isfinite(curve.kl(30)) and curve.kl(30) > 50 * curve.kl(10)
