"""The training health watchdog: rules over the step and evaluation lines the follower reads.

No I/O. The rules (`Rules`, from the run's `health_*` settings) judge Tunix's `Train step N
training loss: X` lines (tpu_rl.rewards.train_step) and MaxText's `Intermediate Eval (step=N)`
lines as the follower consumes them, and the silence since the last step line at each poll:

- `nonfinite_loss`: a loss of nan or inf (Tunix's `%f` prints them as such,
  tunix/sft/peft_trainer.py:735-740 at c4ec573): fatal at once;
- `loss_spike`: a loss whose magnitude passes `spike_factor` times the median magnitude of the
  last `spike_window` finite losses (GRPO's loss sits near zero and may be negative, so the rule
  compares magnitudes): fatal;
- `stall`: no new step line for `stall_factor` times the median step interval, and at least
  `stall_floor_s`, while the training pod runs: fatal;
- `reward_collapse`: an Intermediate Eval's mean_reward below the best one so far by more than
  `reward_drop` (in reward units: MaxText's GSM8K rewards add up several rewards of up to 3
  each, so early evaluations move by tenths; a relative drop fires on their noise): fatal;
- slow steps: a step interval above `slow_factor` times the median: a warning line only.

The watchdog's memory lives in `FollowState.health` (JSON: the saved position carries it, so a
rebuilt trigger goes on with the same losses, intervals and best reward). It never holds a nan
or inf: the position is JSON that refuses them (tpu_rl.rewards.position). Each dict is replaced,
never changed in place (the saved position compares the old value with the new).

A fatal rule records the anomaly: the rule, the step, the evidence lines (masked) and the
anomaly step, the first step whose checkpoint is not trusted (tpu_rl.rewards.checkpoint_choice
never chooses a step at or after it).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from tpu_rl.token_masking import redact

REASON = "training_unhealthy"  # the reward trigger's event when the watchdog stops training
NONFINITE, SPIKE, STALL, COLLAPSE = "nonfinite_loss", "loss_spike", "stall", "reward_collapse"
STOP, EXPORT_HEALTHY = "stop", "export_healthy"  # health_action (tpu_rl.settings.choices)
INTERVALS_KEPT = 50  # the step intervals the median is taken over
EVIDENCE_KEPT = 3  # the step lines kept as evidence (the newest last)
MIN_INTERVALS = 3  # the stall and slow rules wait for this many intervals


@dataclass(frozen=True)
class Rules:
    """The watchdog's rules; a factor or drop of 0 turns its rule off."""

    nonfinite_loss: bool = True
    spike_factor: float = 10.0
    spike_window: int = 20
    stall_factor: float = 5.0
    stall_floor_s: float = 1800.0
    reward_drop: float = 1.0
    slow_factor: float = 3.0
    action: str = STOP

    @classmethod
    def from_settings(cls, s: Any) -> Rules:
        """The rules of a run's settings (tpu_rl.settings.fields: health_*)."""
        return cls(
            nonfinite_loss=bool(s.health_nonfinite_loss),
            spike_factor=float(s.health_spike_factor),
            spike_window=int(s.health_spike_window),
            stall_factor=float(s.health_stall_factor),
            stall_floor_s=float(s.health_stall_floor_minutes) * 60.0,
            reward_drop=float(s.health_reward_drop),
            slow_factor=float(s.health_slow_factor),
            action=str(s.health_action),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Rules:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def armed(memory: dict[str, Any] | None, rules: Rules) -> dict[str, Any]:
    """The watchdog's memory with these rules (a resumed memory keeps what it has seen)."""
    return {**(memory or {}), "rules": rules.as_dict()}


def fatal(memory: dict[str, Any] | None) -> dict[str, Any] | None:
    """The anomaly a fatal rule recorded, if any."""
    return (memory or {}).get("fatal")


def on_step(
    memory: dict[str, Any], step: int, loss: float, at: float, text: str
) -> tuple[dict[str, Any], list[str]]:
    """Judge one step line (`at`: its log time): the new memory and the warnings to log."""
    rules = Rules.from_dict(memory.get("rules"))
    seen = dict(memory)
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
    seen.update(last=[step, at], intervals=intervals, evidence=evidence)
    if fatal(seen) is not None:
        return seen, warnings
    losses = list(seen.get("losses", []))
    if not math.isfinite(loss):
        if rules.nonfinite_loss:
            seen["fatal"] = _anomaly(NONFINITE, step, step, f"loss {loss} at step {step}", [line])
        return seen, warnings
    typical = _median([abs(x) for x in losses]) if len(losses) >= _needed(rules) else None
    if rules.spike_factor and typical and abs(loss) > rules.spike_factor * typical:
        why = (
            f"loss {loss:g} at step {step} is over {rules.spike_factor:g}x the median "
            f"{typical:g} of the last {len(losses)} losses"
        )
        seen["fatal"] = _anomaly(SPIKE, step, step, why, evidence)
    seen["losses"] = [*losses, loss][-max(1, rules.spike_window) :]
    return seen, warnings


def on_eval(memory: dict[str, Any], step: int, mean_reward: Any, text: str) -> dict[str, Any]:
    """Judge one Intermediate Eval line: the new memory (best mean_reward, a collapse)."""
    rules = Rules.from_dict(memory.get("rules"))
    if not isinstance(mean_reward, int | float) or not math.isfinite(mean_reward):
        return memory
    seen, best = dict(memory), memory.get("best_reward")
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


def on_quiet(memory: dict[str, Any] | None, now: float) -> dict[str, Any] | None:
    """Judge the silence since the last step line at `now` while the pods run: the new memory
    with a stall recorded, or None when there is none."""
    if not memory or fatal(memory) is not None or memory.get("last") is None:
        return None
    rules = Rules.from_dict(memory.get("rules"))
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


def describe(anomaly: dict[str, Any]) -> str:
    """The anomaly in one line: the rule, the step, why, and the evidence lines."""
    lines = "; ".join(anomaly.get("evidence") or [])
    return (
        f"Training health: {anomaly['rule']} at step {anomaly['step']}: {anomaly['why']}; no "
        f"checkpoint from step {anomaly['anomaly_step']} on is used"
        + (f". Evidence: {lines}" if lines else "")
    )


def _anomaly(rule: str, step: int, anomaly_step: int, why: str, evidence: list[str]) -> dict:
    return {
        "rule": rule,
        "step": step,
        "anomaly_step": anomaly_step,
        "why": redact(why),
        "evidence": list(evidence),
    }


def _needed(rules: Rules) -> int:
    """How many finite losses the spike rule waits for: half its window, at least 2."""
    return max(2, rules.spike_window // 2)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
