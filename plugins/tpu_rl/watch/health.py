"""The training health watchdog: rules over the step and evaluation lines the follower reads.

No I/O. The rules (`Rules`, from the run's `health_*` settings) judge Tunix's `Train step N
training loss: X` lines (tpu_rl.training_log.train_step) and MaxText's `Intermediate Eval (step=N)`
lines as the follower consumes them, and the silence since the last step line at each poll:

- `nonfinite_loss`: a loss of nan or inf (Tunix's `%f` prints them as such,
  tunix/sft/peft_trainer.py:735-740 at c4ec573), a perplexity of inf beside a finite loss
  (Tunix logs `np.exp` of the loss, tunix/sft/peft_trainer.py:472 at google-tunix 0.1.7: a
  loss past ~88.7 in float32), or an Intermediate Eval's mean_reward of nan or inf: fatal at
  once. A step line's anomaly step is the step before it: Tunix buffers update N's loss,
  computed with the weights of N-1 updates, at step N-1 and logs it during update N+1 one step
  up ("increment the step by one for logging purpose, because train_step is not incremented
  until the next model update", _write_train_metrics, tunix/sft/peft_trainer.py:523-540 and
  712-728 at google-tunix 0.1.7), so the weights checkpoint N-1 holds gave step N's nan. An
  evaluation's is its own step: `Intermediate Eval (step=N)` scores the weights checkpoint N
  holds (tpu_rl.checkpoints.checkpoint_choice);
- `loss_spike`: a loss whose magnitude passes both `spike_floor` and `spike_factor` times the
  median magnitude of the last `spike_window` finite losses: fatal. GRPO's loss is not a loss
  that falls: with one iteration per batch it is beta times the KL plus the policy term, whose
  group-normalised advantages (tunix/rl/algo_core.py compute_advantages: `(r - mean) / (std +
  1e-6)`) average to zero, so it sits near zero, changes sign and swings on batches holding an
  empty completion; its magnitude relative to its own median is noise. The real runs of
  sandbox/corpus set the default floor: the 13 without a fault never pass |loss| 0.36 while
  their median magnitude is 0.0004 to 0.13 (relative rule alone: 6 of them stopped), and a
  diverged policy (fault-lr-collapse, a learning rate of 3.0) logs -75728.5 at its third step.
  A floor of 10 is past any healthy GRPO loss (|advantage| <= sqrt(G - 1) per group of G) and
  far below a divergence;
- `stall`: no new step line for `stall_factor` times the median step interval, and at least
  `stall_floor_s`, while the training pod runs: fatal;
- `reward_collapse`: an Intermediate Eval's mean_reward below the best one so far by more than
  `reward_drop` (in reward units: MaxText's GSM8K rewards add up several rewards of up to 3
  each, so early evaluations move by tenths; a relative drop fires on their noise): fatal;
- slow steps: a step interval above `slow_factor` times the median: a warning line only.

The event-file rules see a step late: Tunix's metrics logger flushes the file every
`log_period` steps (MaxText rl.yml: 20) and at close, so a KL or flat-reward fault is judged up
to `log_period` steps after it happened; the step-line rules judge each line as it is logged.

Where the run's TensorBoard event files are readable (tpu_rl.rewards.event_files), two more
rules judge their scalars (`on_scalar`; GRPO's tags at google-tunix 0.1.7, in sandbox/corpus):

- `kl_blowup`: `actor/train/kl` above `kl_factor` times the median magnitude of its last
  KL_WINDOW values and above `kl_floor` (the median is ~0 early on: the policy starts as the
  reference), while the batch reward of the same rollout (`rewards/train/score/mean` at the
  step before) is below the median of the last REWARD_WINDOW batch rewards: fatal. A policy
  that learns moves away from the reference too: in sandbox/corpus the KL of healthy runs
  reaches 3.2 (a policy that put all its mass on the rewarded word, reward 1.0) and Tunix's
  `kl` estimate goes negative (-9.1); without the reward, the KL rule stopped 4 of the 13.
  The real blow-up (fault-kl-blowup: gradient ascent from update 15) takes the KL from 0.0 to
  3.5 while every completion scores 0. Tunix's `kl` is a log-ratio estimate that may be
  negative: the median is of magnitudes. Its anomaly step is the step before: Tunix computes
  update N's KL with the weights of N-1 updates, which checkpoint N-1 holds. A KL of exactly 0
  is GRPO's with `beta` 0 (`aux = {"kl": 0.0}`, tunix/rl/algo_core.py:563-609 at c4ec573):
  never a blow-up. A nan or inf KL is left to `nonfinite_loss`: the loss adds `beta * kl`.
- `reward_std_collapse`: Tunix logs no reward std for GRPO, only `rewards/train/score/{mean,
  max,min}` over the whole batch (tunix/rl/grpo/grpo_learner.py:376-383 at c4ec573). A batch
  whose max and min agree (within SPREAD_EPS) has a reward std of 0 in every group, so every
  GRPO advantage `(r - mean) / (std + 1e-6)` is 0 (tunix/rl/algo_core.py:639-656): no learning
  signal. `reward_spread_steps` such batches in a row are fatal when their reward is below the
  best batch reward seen before them (a collapsed policy: fault-lr-collapse scores every
  completion 0 from its second batch), and a checkpoint before them is the one worth keeping.
  A flat batch at or above that best is a saturated reward (sandbox/corpus layers4: every
  completion scored 1.0 for 35 batches, and lr1e-2: 17): the task is learned, not broken.
  Its anomaly step is the first batch of the run: the rewards at TensorBoard step k are global
  step k+1's rollout, sampled with the weights of k updates, which checkpoint k holds
  (sandbox/corpus: `rewards/*` count steps from 0, `actor/train/*` from 1).

The watchdog's memory lives in `FollowState.health` (JSON: the saved position carries it, so a
rebuilt trigger goes on with the same losses, intervals and best reward). It never holds a nan
or inf: the position is JSON that refuses them (tpu_rl.rewards.position). Each dict is replaced,
never changed in place (the saved position compares the old value with the new).

A fatal rule records the anomaly: the rule, the step, the evidence lines (masked) and the
anomaly step, the first step whose checkpoint is not trusted (tpu_rl.checkpoints.checkpoint_choice
never chooses a step at or after it).
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from tpu_rl.settings.choices import HealthAction
from tpu_rl.settings.fields import RunSettings
from tpu_rl.settings.params import default_settings
from tpu_rl.token_masking import redact

NONFINITE, SPIKE, STALL, COLLAPSE = "nonfinite_loss", "loss_spike", "stall", "reward_collapse"
KL_BLOWUP, STD_COLLAPSE = "kl_blowup", "reward_std_collapse"  # rules on TensorBoard scalars
INTERVALS_KEPT = 50  # the step intervals the median is taken over
EVIDENCE_KEPT = 3  # the step lines kept as evidence (the newest last)
MIN_INTERVALS = 3  # the stall and slow rules wait for this many intervals
KL_TAG = "actor/train/kl"
SCORE_MAX, SCORE_MIN = "rewards/train/score/max", "rewards/train/score/min"
SCORE_MEAN = "rewards/train/score/mean"
BOARD_TAGS = (KL_TAG, SCORE_MAX, SCORE_MEAN, SCORE_MIN)  # the event files' scalars judged
REWARD_WINDOW = 20  # the batch rewards the KL rule's median is taken over
KL_WINDOW = 20  # the KL values the median is taken over (the rule waits for half of them)
SPREAD_EPS = 1e-6  # a batch's max - min at most this: all its rewards equal


class Anomaly(TypedDict):
    """What a fatal rule recorded: the rule, the step it saw it at, the first step whose
    checkpoint is not trusted, why (masked), and the evidence lines (masked)."""

    rule: str
    step: int
    anomaly_step: int
    why: str
    evidence: list[str]


class Memory(TypedDict, total=False):
    """The watchdog's memory (JSON: FollowState.health, carried by the saved position)."""

    rules: Rules  # this attempt's (as a dict in JSON: FollowState.as_dict, from_dict)
    fatal: Anomaly | None  # the first fatal rule's anomaly
    last: list[float]  # the newest step line: [step, log time]
    intervals: list[float]  # the newest step intervals, seconds per step
    evidence: list[str]  # the newest step lines (masked)
    losses: list[float]  # the newest finite losses
    best_reward: list[float]  # the best Intermediate Eval: [step, mean_reward]
    board_steps: dict[str, int]  # each TensorBoard tag's last step judged
    kls: list[float]  # the newest actor/train/kl values
    rewards: list[list[float]]  # the newest batch rewards: [TensorBoard step, mean]
    score: dict[str, float]  # the batch being paired: its step, its max and min
    flat: list[int] | None  # the flat batches in a row: [first TensorBoard step, count]
    best_batch: float  # the best batch reward before the flat run


@dataclass(frozen=True)
class Rules:
    """The watchdog's rules, one per health_* setting (tpu_rl.settings.fields), whose defaults
    are the settings' own (`defaults`); a factor or drop of 0 turns its rule off."""

    nonfinite_loss: bool
    spike_factor: float
    spike_floor: float
    spike_window: int
    stall_factor: float
    stall_floor_s: float
    reward_drop: float
    slow_factor: float
    kl_factor: float
    kl_floor: float
    reward_spread_steps: int
    action: HealthAction

    @classmethod
    def from_settings(cls, s: RunSettings) -> Rules:
        """The rules of a run's settings (tpu_rl.settings.fields: health_*)."""
        return cls(
            nonfinite_loss=bool(s.health_nonfinite_loss),
            spike_factor=float(s.health_spike_factor),
            spike_floor=float(s.health_spike_floor),
            spike_window=int(s.health_spike_window),
            stall_factor=float(s.health_stall_factor),
            stall_floor_s=float(s.health_stall_floor_minutes) * 60.0,
            reward_drop=float(s.health_reward_drop),
            slow_factor=float(s.health_slow_factor),
            kl_factor=float(s.health_kl_factor),
            kl_floor=float(s.health_kl_floor),
            reward_spread_steps=int(s.health_reward_spread_steps),
            action=HealthAction(s.health_action),
        )

    @classmethod
    def defaults(cls, **changed: Any) -> Rules:
        """The rules of the settings' defaults (params.json), with `changed` rules."""
        return replace(_default_rules(), **changed)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Rules:
        """Rules saved as a dict; a rule it lacks (saved by an older version) is the default."""
        known = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        if "action" in known:
            known["action"] = HealthAction(known["action"])
        return cls.defaults(**known)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@functools.cache
def _default_rules() -> Rules:
    return Rules.from_settings(default_settings())


def armed(memory: Memory | None, rules: Rules) -> Memory:
    """The watchdog's memory with these rules (a resumed memory keeps what it has seen)."""
    return {**(memory or {}), "rules": rules}


def fatal(memory: Memory | None) -> Anomaly | None:
    """The anomaly a fatal rule recorded, if any."""
    return (memory or {}).get("fatal")


def on_step(
    memory: Memory,
    step: int,
    loss: float,
    at: float,
    text: str,
    perplexity: float | None = None,
) -> tuple[Memory, list[str]]:
    """Judge one step line (`at`: its log time; `perplexity`: None when the line has none):
    the new memory and the warnings to log."""
    rules = memory["rules"]
    seen = memory.copy()
    line = redact(text.strip())
    evidence = [*seen.get("evidence", []), line][-EVIDENCE_KEPT:]
    intervals = list(seen.get("intervals", []))
    warnings = []
    last = seen.get("last")
    if last is not None and step > last[0] and at >= last[1]:
        interval = (at - last[1]) / (step - last[0])
        typical = _median(intervals) if len(intervals) >= MIN_INTERVALS else None
        if rules.slow_factor and typical and interval > rules.slow_factor * typical:
            warnings.append(
                f"Slow step: step {step} took {interval:.1f}s, over {rules.slow_factor:g}x the "
                f"median step interval {typical:.1f}s (health_slow_factor)"
            )
        intervals = [*intervals, interval][-INTERVALS_KEPT:]
    seen.update({"last": [step, at], "intervals": intervals, "evidence": evidence})
    if fatal(seen) is not None:
        return seen, warnings
    losses = list(seen.get("losses", []))
    if rules.nonfinite_loss and (what := _nonfinite(loss, perplexity)):
        # update `step`'s loss, from the weights of step - 1 updates (the module's docstring)
        why = f"{what} at step {step}"
        seen["fatal"] = _anomaly(NONFINITE, step, max(step - 1, 0), why, [line])
        return seen, warnings
    if not math.isfinite(loss):
        return seen, warnings
    typical = _median([abs(x) for x in losses]) if len(losses) >= _needed(rules) else None
    limit = max(rules.spike_factor * (typical or 0.0), rules.spike_floor)
    if rules.spike_factor and limit > 0 and abs(loss) > limit:
        relative = (
            f"{rules.spike_factor:g}x the median {typical:g} of the last {len(losses)} losses and "
            if typical is not None
            else ""
        )
        why = (
            f"loss {loss:g} at step {step} is over {relative}health_spike_floor "
            f"{rules.spike_floor:g}: GRPO's loss stays near zero"
        )
        # update `step`'s loss, from the weights of step - 1 updates (as nonfinite_loss's)
        seen["fatal"] = _anomaly(SPIKE, step, max(step - 1, 0), why, evidence)
    seen["losses"] = [*losses, loss][-max(1, rules.spike_window) :]
    return seen, warnings


def on_eval(memory: Memory, step: int, mean_reward: Any, text: str) -> Memory:
    """Judge one Intermediate Eval line (`mean_reward`: as logged, nan included; None when the
    line has none): the new memory (best mean_reward, a non-finite one, a collapse)."""
    rules = memory["rules"]
    if not isinstance(mean_reward, int | float):
        return memory
    if not math.isfinite(mean_reward):
        if fatal(memory) is not None or not rules.nonfinite_loss:
            return memory
        why = f"mean_reward {mean_reward} at step {step}"
        return {**memory, "fatal": _anomaly(NONFINITE, step, step, why, [redact(text.strip())])}
    seen, best = memory.copy(), memory.get("best_reward")
    if best is None or mean_reward > best[1]:
        seen["best_reward"] = [step, float(mean_reward)]
        return seen
    drop = best[1] - mean_reward
    if fatal(seen) is None and rules.reward_drop and drop > rules.reward_drop:
        why = (
            f"mean_reward {mean_reward:g} at step {step} fell {drop:g} from the best "
            f"{best[1]:g} (step {best[0]}), more than health_reward_drop {rules.reward_drop:g}"
        )
        seen["fatal"] = _anomaly(COLLAPSE, step, step, why, [redact(text.strip())])
    return seen


def on_scalar(memory: Memory, tag: str, step: int, value: float, source: str) -> Memory:
    """Judge one TensorBoard scalar of BOARD_TAGS (`source`: its event file): the new memory.
    A step at or before the last one judged of its tag (a restarted pod's new file repeats the
    steps since its checkpoint) is skipped."""
    judged = dict(memory.get("board_steps") or {})
    if step <= judged.get(tag, -1) or not math.isfinite(value):
        return memory
    seen = memory.copy()
    seen["board_steps"] = {**judged, tag: step}
    if tag == KL_TAG:
        return _judge_kl(seen, step, value, source)
    if tag == SCORE_MEAN:
        return _note_reward(seen, step, value)
    return _judge_spread(seen, tag, step, value, source)


def _note_reward(seen: Memory, step: int, mean: float) -> Memory:
    """Keep the newest batch rewards (the KL rule's median) and the best one before a run of
    flat batches (the spread rule's saturation)."""
    seen["rewards"] = [*(seen.get("rewards") or []), [step, mean]][-REWARD_WINDOW - 1 :]
    flat, best = seen.get("flat"), seen.get("best_batch")
    if (flat is None or step < flat[0]) and (best is None or mean > best):
        seen["best_batch"] = mean
    return seen


def _judge_kl(seen: Memory, step: int, kl: float, source: str) -> Memory:
    rules = seen["rules"]
    kls = list(seen.get("kls") or [])
    typical = _median([abs(x) for x in kls]) if len(kls) >= KL_WINDOW // 2 else None
    over = typical is not None and kl > rules.kl_factor * typical and kl > rules.kl_floor
    losing = _reward_falling(seen, step)
    if fatal(seen) is None and rules.kl_factor and over and losing is not None:
        why = (
            f"{KL_TAG} {kl:g} at step {step} is over {rules.kl_factor:g}x the median {typical:g} "
            f"of the last {len(kls)} values (health_kl_factor) and over health_kl_floor "
            f"{rules.kl_floor:g}, while {losing}"
        )
        line = f"{source}: {KL_TAG}={kl:g} at step {step}"
        seen["fatal"] = _anomaly(KL_BLOWUP, step, max(step - 1, 0), why, [line])
    seen["kls"] = [*kls, kl][-KL_WINDOW:]
    return seen


def _reward_falling(seen: Memory, step: int) -> str | None:
    """How the batch reward of update `step`'s rollout (TensorBoard step `step` - 1) is below
    the median of the batch rewards before it; None when it is not (or is not known)."""
    rewards = seen.get("rewards") or []
    batch = next((r for s, r in rewards if s == step - 1), None)
    before = [r for s, r in rewards if s < step - 1][-REWARD_WINDOW:]
    if batch is None or not before or batch >= (typical := _median(before) or 0.0):
        return None
    return f"its batch's mean reward {batch:g} is below the median {typical:g} of the last " + (
        f"{len(before)} batches: the policy leaves the reference and gains no reward"
    )


def _judge_spread(seen: Memory, tag: str, step: int, value: float, source: str) -> Memory:
    """Pair a batch's score max and min by step; count the batches in a row that agree."""
    score = dict(seen.get("score") or {})
    score = {**(score if score.get("step") == step else {"step": step}), tag: value}
    seen["score"] = score
    if SCORE_MAX not in score or SCORE_MIN not in score:
        return seen
    spread = score[SCORE_MAX] - score[SCORE_MIN]
    if spread > SPREAD_EPS:
        seen["flat"] = None
        return seen
    first, count = seen.get("flat") or [step, 0]
    seen["flat"] = [first, count + 1]
    rules = seen["rules"]
    best = seen.get("best_batch")
    saturated = best is not None and score[SCORE_MAX] >= best - SPREAD_EPS
    if (
        fatal(seen) is None
        and rules.reward_spread_steps
        and count + 1 >= rules.reward_spread_steps
        and not saturated
    ):
        why = (
            f"every reward of the batch was {score[SCORE_MAX]:g} for {count + 1} steps in a row "
            f"(TensorBoard steps {first} to {step}; health_reward_spread_steps "
            f"{rules.reward_spread_steps})"
            + ("" if best is None else f", below the best batch reward {best:g} before them")
            + ": GRPO's advantages are all 0, the policy collapsed"
        )
        values = f"{SCORE_MAX}={score[SCORE_MAX]:g} {SCORE_MIN}={score[SCORE_MIN]:g}"
        line = f"{source}: {values} at step {step}"
        seen["fatal"] = _anomaly(STD_COLLAPSE, step, first, why, [line])
    return seen


def on_quiet(memory: Memory | None, now: float) -> Memory | None:
    """Judge the silence since the last step line at `now` while the pods run: the new memory
    with a stall recorded, or None when there is none."""
    if not memory or fatal(memory) is not None or memory.get("last") is None:
        return None
    rules = memory["rules"]
    intervals = memory.get("intervals") or []
    if not rules.stall_factor or len(intervals) < MIN_INTERVALS:
        return None
    limit = max(rules.stall_factor * (_median(intervals) or 0.0), rules.stall_floor_s)
    step, at = memory["last"]
    silent = now - at
    if silent <= limit:
        return None
    why = (
        f"no Train step line for {silent:.0f}s after step {int(step)}, over the stall limit "
        f"{limit:.0f}s (health_stall_factor {rules.stall_factor:g}x the median step interval, "
        f"at least health_stall_floor_minutes) while the training pod runs"
    )
    # a stall poisons no weights: every checkpoint up to the last step shown is healthy
    evidence = list(memory.get("evidence") or [])[-1:]
    return {**memory, "fatal": _anomaly(STALL, int(step), int(step) + 1, why, evidence)}


# What to do next, per rule: the cause to look for, the settings that address it, and the rule's
# own setting when the run's behaviour is expected. Every message that ends a wait ends with it.
NEXT_STEPS = {
    NONFINITE: (
        "lower learning_rate or look for a broken row in the batches before it, then run "
        "again (health_action=resume retries once from the healthy checkpoint on its own)"
    ),
    SPIKE: (
        "lower learning_rate or lengthen learning_rate_schedule_steps, then run again; raise "
        "health_spike_floor if swings this large are expected"
    ),
    STALL: (
        "read the last lines of the training and backend pods' logs for what hung (a lost "
        "host, out of memory), then run again; raise health_stall_floor_minutes if steps "
        "this long are expected"
    ),
    COLLAPSE: (
        "lower learning_rate, then run again; raise health_reward_drop if evaluations this "
        "noisy are expected"
    ),
    KL_BLOWUP: (
        "lower learning_rate (the policy drifted far from the reference model), then run "
        "again; raise health_kl_factor if this KL is expected"
    ),
    STD_COLLAPSE: (
        "raise rl_num_generations or decode_sampling_temperature for varied completions, or "
        "use harder prompts, then run again; raise health_reward_spread_steps to wait longer"
    ),
}


def next_step(anomaly: Anomaly) -> str:
    """What to do next about the anomaly, in a sentence (its rule's NEXT_STEPS)."""
    advice = NEXT_STEPS.get(anomaly.get("rule") or "", "read the evidence, then run again")
    return f"Next: {advice}."


def failure_text(anomaly: Anomaly, kept: str) -> str:
    """The wait's failure: rule, step, why and the next step first (a note's line), then more."""
    lines = "; ".join(anomaly.get("evidence") or [])
    return "\n".join(
        [
            f"Training health: {anomaly['rule']} at step {anomaly['step']} (health_action="
            f"{anomaly.get('action')}): {anomaly['why']}. {next_step(anomaly)}",
            f"No checkpoint from step {anomaly['anomaly_step']} on is used; {kept}.",
            *([f"Evidence: {lines}"] if lines else []),
        ]
    )


def describe(anomaly: Anomaly, evidence: bool = True) -> str:
    """The anomaly in one line: rule, step, why, evidence (without `evidence`: where it is)."""
    lines = "; ".join(anomaly.get("evidence") or [])
    if lines and not evidence:
        lines = "in the task log and the run report"
    return (
        f"Training health: {anomaly['rule']} at step {anomaly['step']}: {anomaly['why']}; no "
        f"checkpoint from step {anomaly['anomaly_step']} on is used"
        + (f". Evidence: {lines}" if lines else "")
    )


def _anomaly(rule: str, step: int, anomaly_step: int, why: str, evidence: list[str]) -> Anomaly:
    return {
        "rule": rule,
        "step": step,
        "anomaly_step": anomaly_step,
        "why": redact(why),
        "evidence": list(evidence),
    }


def _nonfinite(loss: float, perplexity: float | None) -> str | None:
    """What of a step line is nan or inf (the loss, else its perplexity), if any."""
    if not math.isfinite(loss):
        return f"loss {loss}"
    if perplexity is not None and not math.isfinite(perplexity):
        return f"perplexity {perplexity} (loss {loss:g})"
    return None


def _needed(rules: Rules) -> int:
    """How many finite losses the spike rule waits for: half its window, at least 2."""
    return max(2, rules.spike_window // 2)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
