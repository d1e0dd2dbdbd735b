"""What the sandbox's GRPO client computes each step: how long the step takes, its loss and the
TensorBoard scalars, deterministic given a seed, and the training faults a scenario injects
(NaN, a loss spike, a stall, slow steps, a reward collapse, a KL blow-up, a
reward-spread collapse).

The curve's shape is calibrated to real GRPO runs (sandbox/corpus, recorded from
Tunix's trainer by `make corpus`; tests/sandbox/test_training_curve_calibration.py compares the
two): the loss is beta times the KL plus a policy term that is zero on average (group-normalised
advantages) and swings negative on some batches, so it sits near zero and changes sign; the KL
starts near 0 and rises; the batch reward rises. The faults take their values from the
corpus's real faults: a diverging loss is fault-lr-collapse's, and a KL blow-up or a collapsed
policy scores every completion 0 (fault-kl-blowup, fault-lr-collapse)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

# fault-lr-collapse.json: the loss the real trainer logged at step 3, once a learning rate of
# 3.0 had diverged the policy
LR_COLLAPSE_LOSS = -75728.5
# The policy term of the healthy real runs (sandbox/corpus, 13 runs): 39% of their losses are
# negative, down to -0.35; the others sit within a few thousandths of beta * KL, more often
# above it.
NEGATIVE_SWING_P = 0.3
NEGATIVE_SWING = (-0.2, -0.03)
POLICY_NOISE = (-0.001, 0.003)
BETA = 0.04  # MaxText rl.yml's grpo_beta, the corpus's base run


@dataclass(frozen=True)
class TrainingFaults:
    """Faults of one training run; steps are global steps (1-based, as Tunix's line numbers them).

    A fault with a step marks the checkpoints saved at or after it as poisoned (`poisoned_from`);
    a stall and slow steps leave the model healthy.
    """

    nan_at_step: int | None = None  # loss and perplexity are non-finite from this step on
    nan_value: float = math.nan  # math.inf: the line prints `inf` (Tunix's `%f`)
    loss_spike_at_step: int | None = None  # the loss is `loss_spike_value`: it diverged
    loss_spike_value: float = LR_COLLAPSE_LOSS
    loss_spike_steps: int = 1  # how many steps the spike lasts
    stall_at_step: int | None = None  # this update never ends: the pod runs on, silent
    slow_from_step: int | None = None  # steps from here on take `slow_factor` times as long
    slow_factor: float = 3.0
    # the Intermediate Eval at this step (and every later one, and Post) reports a mean_reward
    # `reward_collapse_by` below the best one reported before it
    reward_collapse_at_eval: int | None = None
    reward_collapse_by: float = 0.1
    # actor/train/kl (TensorBoard only) grows from here, and every completion scores 0
    kl_blowup_at_step: int | None = None
    kl_blowup_factor: float = 100.0
    # every completion of global step k's batch scores the same from this step on (TensorBoard
    # only: rewards/train/score/max == min): GRPO's advantages are all 0, nothing is learned
    reward_spread_collapse_at_step: int | None = None
    # reward hacking: from this step the completions grow, up to `length_drift_factor` times
    # their length 20 steps later, while the batch reward keeps rising (TensorBoard only; no
    # health rule sees it, the model is not damaged as the watchdog judges)
    length_drift_from_step: int | None = None
    length_drift_factor: float = 3.0
    # the faults strike the run's first GRPO client process only: a resumed attempt trains
    # healthily (a transient fault, health_action=resume's case)
    first_attempt_only: bool = False

    def for_attempt(self, earlier_attempts: int) -> TrainingFaults:
        """The faults of a client process after `earlier_attempts` others of the same run."""
        return NO_FAULTS if self.first_attempt_only and earlier_attempts else self

    def poisoned_from(self) -> int | None:
        """The first step whose model is damaged: the earliest NaN, spike, collapse, KL or
        flat-reward fault."""
        steps = (
            self.nan_at_step,
            self.loss_spike_at_step,
            self.reward_collapse_at_eval,
            self.kl_blowup_at_step,
            self.reward_spread_collapse_at_step,
        )
        return min((s for s in steps if s is not None), default=None)

    def non_finite(self, step: int) -> bool:
        return self.nan_at_step is not None and step >= self.nan_at_step

    def flat_rewards(self, step: int) -> bool:
        at = self.reward_spread_collapse_at_step
        return at is not None and step >= at

    def collapsed(self, step: int) -> bool:
        return self.reward_collapse_at_eval is not None and step >= self.reward_collapse_at_eval

    def degenerate(self, step: int) -> bool:
        """Every completion scores 0 from here: a KL blow-up's or a collapsed policy's batch."""
        at = (self.kl_blowup_at_step, self.reward_spread_collapse_at_step)
        return any(a is not None and step >= a for a in at)


NO_FAULTS = TrainingFaults()
VARIED_JITTER = 0.1  # +-10% per step
VARIED_SLOW_EVERY = 25  # about one step in 25 is 1.6x slow


@dataclass(frozen=True)
class TrainingCurve:
    """A run's step times and metrics: each step's draw is seeded by (seed, step), so a resumed
    attempt computes the same values for the same steps.

    Step times: `step_seconds` times a uniform jitter of +-`jitter`, and one step in
    `slow_every` (on average) takes `slow_step_factor` times as long (a long rollout); steady
    by default (the scenarios timed to the step), VARIED_JITTER and VARIED_SLOW_EVERY for a
    run as it looks (for the watchdog's ETA and slow-step rules).
    Loss: `beta` times the KL plus the policy term (NEGATIVE_SWING_P of the steps swing
    negative, the others add POLICY_NOISE), as the corpus's healthy runs log it.
    """

    step_seconds: float = 60.0
    seed: int = 0
    jitter: float = 0.0
    slow_every: int = 0
    slow_step_factor: float = 1.6
    beta: float = BETA
    decay_steps: float = 60.0
    faults: TrainingFaults = NO_FAULTS

    def _draw(self, step: int, what: str) -> random.Random:
        return random.Random(f"{self.seed}:{what}:{step}")

    def seconds(self, step: int) -> float:
        """Simulated seconds update `step` takes."""
        draw = self._draw(step, "time")
        base = self.step_seconds * (1 + draw.uniform(-self.jitter, self.jitter))
        if self.slow_every and draw.random() < 1 / self.slow_every:
            base *= self.slow_step_factor
        slow_from = self.faults.slow_from_step
        slowed = slow_from is not None and step >= slow_from
        return base * (self.faults.slow_factor if slowed else 1.0)

    def loss(self, step: int) -> float:
        """Tunix's training loss of `step`: near zero, either sign; non-finite once NaN is
        injected, the diverged value during a spike."""
        if self.faults.non_finite(step):
            return self.faults.nan_value
        spike = self.faults.loss_spike_at_step
        if spike is not None and spike <= step < spike + self.faults.loss_spike_steps:
            return self.faults.loss_spike_value
        draw = self._draw(step, "loss")
        if draw.random() < NEGATIVE_SWING_P:
            policy = draw.uniform(*NEGATIVE_SWING)
        else:
            policy = draw.uniform(*POLICY_NOISE)
        return self.beta * self.kl(step) + policy

    def kl(self, step: int) -> float:
        """actor/train/kl: small and slowly rising; `kl_blowup_factor` times that (and growing)
        from the blow-up step on."""
        if self.faults.non_finite(step):
            return self.faults.nan_value
        kl = 0.002 * (1 + step / 100) * (1 + self._draw(step, "kl").uniform(-0.2, 0.2))
        blowup = self.faults.kl_blowup_at_step
        if blowup is not None and step >= blowup:
            kl *= self.faults.kl_blowup_factor * (1 + (step - blowup) / 10)
        return kl

    def reward(self, step: int) -> float:
        """rewards/train/score/mean of global step `step`: rising from 0.1 towards 0.6; 0 once
        the weights are NaN or the policy degenerate; down by the collapse's amount from the
        collapse on."""
        if self.faults.non_finite(step) or self.faults.degenerate(step):
            return 0.0
        rising = 0.6 - 0.5 * math.exp(-step / self.decay_steps)
        reward = rising + self._draw(step, "reward").uniform(-0.03, 0.03)
        if self.faults.collapsed(step):
            reward -= self.faults.reward_collapse_by
        return max(reward, 0.0)

    def mean_length(self, step: int) -> float:
        """completions/train/mean_length: about 300 tokens; the full 1024 once NaN (garbage);
        growing to length_drift_factor times that over 20 steps from length_drift_from_step."""
        if self.faults.non_finite(step):
            return 1024.0
        length = 300.0 + self._draw(step, "length").uniform(-40.0, 40.0)
        if (start := self.faults.length_drift_from_step) is not None and step >= start:
            length *= 1 + (self.faults.length_drift_factor - 1) * min((step - start) / 20, 1.0)
        return length


def perplexity(loss: float) -> float:
    """Tunix's `np.exp(loss)` (tunix/sft/peft_trainer.py:719 at c4ec573): numpy overflows to
    inf (a warning, not an error) and keeps nan."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf
