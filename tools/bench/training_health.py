"""The training watchdog's figures, from whole DAG runs in the sandbox: each fault of
the matrix once with the watchdog on (the defaults) and once with every rule off, which is
the product without a watchdog (training goes on to its Post line, or its time limit), same settings
and same fault otherwise; and the ETA of runs with varying step times.

- health_detect_latency_s: a NaN loss; from its `Train step N training loss: nan` line (when
  the client logged it) to the training's TPUs released (the last TPU pod that ran at the fault
  ended). Goal: one step interval plus one poll.
- stall_detect_s: a stall (the pod runs, silent); from the last step line to the reward wait's
  end (its trigger's event: the verdict, after it deleted the Job and the backend). Goal: the
  stall rule's multiple of the median step interval (at least its floor) plus a poll.
- tpu_hours_after_fault: chip-hours the training's TPU pods ran after the fault's line (the
  last line before a stall), summed over the matrix (simulated hours). Baseline: the same
  runs with the rules off.
- poisoned_exports: runs of the matrix that exported a checkpoint saved at or after the fault.
- eta_error_at_10pct: the product's ETA (tpu_rl.watch.progress.measure, what the reward wait
  reports) from the step lines up to 10% of the steps, against when the last step's line came,
  as a share of the time still to go; the worst of ETA_SEEDS runs. Baseline: the estimate a
  person makes from `kubectl logs` (time since the training pod started / steps done).

Time: pods and step lines live on the sandbox's simulated clock, Airflow's polls on the wall
clock. TIME_SCALE makes a 60 s step 0.24 wall s and a 1 s poll 250 simulated s (the default
poll is 30 s: a slower poll than production's, against the watchdog); the stall floor and the
training time limit are the defaults scaled the same way (30 min and 12 h of simulated time).
Latencies are in wall seconds, as the goals' step interval and poll are.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox.harness import SETTINGS, RunResult, Sandbox, Workloads
from sandbox.ledger import Attempt, Ledger
from sandbox.training_curve import VARIED_JITTER, VARIED_SLOW_EVERY, TrainingFaults
from sandbox.workloads import EvalResult
from tools.bench.metric import metric
from tpu_rl.names import Step
from tpu_rl.watch.progress import PROGRESS_EVENT, Spend, measure

TIME_SCALE = 0.004
POLL_S = int(SETTINGS["poll_interval_seconds"])
STEP_S = 60.0  # simulated seconds a step takes (Workloads.train_step_s)
FAULT_AT = 35
COLLAPSE_AT = 30  # an Intermediate Eval's step (eval_interval 10)
STALL_FLOOR_MIN = 30.0  # health_stall_floor_minutes' default
STALL_FACTOR = 5.0  # health_stall_factor's default
TRAINING_LIMIT_MIN = 720  # training_timeout_minutes' default: the Job's activeDeadlineSeconds
RUN = {
    **SETTINGS,
    "num_batches": 60,
    "checkpoint_period": 10,
    "health_stall_floor_minutes": STALL_FLOOR_MIN * TIME_SCALE,
    "health_reward_spread_steps": 8,  # the default 20 is a third of this short run
}
# every rule off: the product without a watchdog
RULES_OFF = {
    "health_nonfinite_loss": False,
    "health_spike_factor": 0.0,
    "health_stall_factor": 0.0,
    "health_reward_drop": 0.0,
    "health_slow_factor": 0.0,
    "health_kl_factor": 0.0,
    "health_reward_spread_steps": 0,
}
# GSM8K's mean_reward adds several rewards of up to 3 each: a drop of 1.5 passes the default
# health_reward_drop of 1.0 (as tests/e2e/test_training_health.py)
REWARDING = {
    "pre": EvalResult(corr=8, mean_reward=0.5),
    "post": EvalResult(corr=12, mean_reward=2.5),
}
FAULTS = {
    "nan": TrainingFaults(nan_at_step=FAULT_AT),
    "inf": TrainingFaults(nan_at_step=FAULT_AT, nan_value=float("inf")),
    "loss_spike": TrainingFaults(loss_spike_at_step=FAULT_AT),
    "stall": TrainingFaults(stall_at_step=FAULT_AT),
    "reward_collapse": TrainingFaults(reward_collapse_at_eval=COLLAPSE_AT, reward_collapse_by=1.5),
    "kl_blowup": TrainingFaults(kl_blowup_at_step=FAULT_AT),
    "reward_spread": TrainingFaults(reward_spread_collapse_at_step=FAULT_AT),
}
ETA_SEEDS = (1, 2, 3)
ETA_BATCHES = 100
ETA_GOAL = 0.10


def workloads(faults: TrainingFaults, seed: int = 0) -> Workloads:
    """The run's pods: step times varying as a run's do, the fault, rewarding evaluations."""
    return Workloads(
        **REWARDING,
        train_step_s=STEP_S,
        train_step_jitter=VARIED_JITTER,
        train_slow_step_every=VARIED_SLOW_EVERY,
        train_seed=seed,
        train_faults=faults,
    )


def one_run(tmp: Path, conf: dict[str, Any], pods: Workloads) -> RunResult:
    tmp.mkdir(parents=True)
    with Sandbox(tmp).up() as box:
        return box.run(conf, pods, TIME_SCALE)


def training(ledger: Ledger) -> Attempt:
    (attempt,) = ledger.attempts  # one GRPO client process: nothing preempts these runs
    return attempt


def logged_at(attempt: Attempt, step: int) -> float:
    """When the client logged `step`'s line (simulated seconds)."""
    return attempt.step_ends[attempt.steps.index(step)]


@dataclass(frozen=True)
class FaultRun:
    """One run of the matrix: when its fault showed, when its training TPUs were released,
    what they ran after the fault, and what it exported."""

    fault: str
    state: str | None
    fault_line_at: float  # simulated: the fault step's line (the last line before a stall)
    released_at: float | None  # simulated: the last TPU pod running at the fault ended
    ended_at: float | None  # simulated: the reward wait's end (its trigger's event)
    chip_s_after: float
    median_step_s: float  # simulated, between this attempt's step lines before the fault
    exported: int | None
    poisoned: bool
    rule: str | None
    leftovers: list[str]

    def latency_wall_s(self) -> float | None:
        """Wall seconds from the fault's line to the TPUs released."""
        if self.released_at is None:
            return None
        return (self.released_at - self.fault_line_at) * TIME_SCALE

    def detect_wall_s(self) -> float | None:
        """Wall seconds from the fault's line to the wait's end (the verdict, its deletes)."""
        if self.ended_at is None:
            return None
        return (self.ended_at - self.fault_line_at) * TIME_SCALE

    def as_dict(self) -> dict[str, Any]:
        latency = self.latency_wall_s()
        return {
            "state": self.state,
            "rule": self.rule,
            "fault_line_simulated_s": round(self.fault_line_at, 1),
            "released_after_wall_s": None if latency is None else round(latency, 3),
            "wait_ended_after_wall_s": _rounded(self.detect_wall_s()),
            "chip_hours_after_fault": round(self.chip_s_after / 3600, 3),
            "median_step_wall_s": round(self.median_step_s * TIME_SCALE, 3),
            "exported_step": self.exported,
            "poisoned_export": self.poisoned,
            "leftovers": self.leftovers,
        }


def fault_run(tmp: Path, fault: str, rules: dict[str, Any]) -> FaultRun:
    faults = FAULTS[fault]
    result = one_run(tmp, {**RUN, **rules}, workloads(faults))
    ledger, attempt = result.ledger, training(result.ledger)
    shown = faults.stall_at_step - 1 if faults.stall_at_step else faults.poisoned_from()
    fault_at = logged_at(attempt, shown)
    running = [p for p in ledger.tpu_pods if p.started <= fault_at < (p.ended or math.inf)]
    ends = [p.ended for p in running]
    released = None if not ends or None in ends else max(e for e in ends if e is not None)
    until = ledger.clock()
    before = [t for s, t in zip(attempt.steps, attempt.step_ends, strict=True) if s <= shown]
    exported = result.xcoms.get("export.checkpoint_step")
    poisoned_from = faults.poisoned_from()
    events = [e for e in result.trigger_events if e.get("reason") == "training_unhealthy"]
    ends = [
        e["fired_at"]
        for e in result.trigger_events
        if e["task_id"] == Step.WAIT_FOR_REWARDS and e.get("reason") != PROGRESS_EVENT
    ]
    wall_end = datetime.fromtimestamp(ends[0], UTC) if ends else None
    return FaultRun(
        fault=fault,
        state=result.state,
        fault_line_at=fault_at,
        released_at=released,
        ended_at=None if wall_end is None else ledger.clock.simulated_at(wall_end),
        chip_s_after=sum(p.tpu * max(0.0, (p.ended or until) - fault_at) for p in running),
        median_step_s=statistics.median(b - a for a, b in itertools.pairwise(before)),
        exported=exported,
        poisoned=exported is not None and poisoned_from is not None and exported >= poisoned_from,
        rule=events[0]["anomaly"]["rule"] if events else None,
        leftovers=result.leftovers,
    )


def eta_errors(tmp: Path, seed: int) -> dict[str, Any]:
    """One healthy run with varying step times: the product's ETA and the naive one at 10%."""
    conf = {**RUN, "num_batches": ETA_BATCHES, "checkpoint_period": 25}
    result = one_run(tmp, conf, workloads(TrainingFaults(), seed))
    attempt = training(result.ledger)
    marks = [[s, t] for s, t in zip(attempt.steps, attempt.step_ends, strict=True)]
    at_10 = next(i for i, (s, _) in enumerate(marks) if s >= ETA_BATCHES // 10)
    now, end = marks[at_10][1], logged_at(attempt, ETA_BATCHES)
    eta = measure(marks[: at_10 + 1], marks[0], ETA_BATCHES, marks[0][1], Spend()).eta
    step = marks[at_10][0]
    naive = attempt.started + (now - attempt.started) / step * ETA_BATCHES
    to_go = end - now
    return {
        "seed": seed,
        "state": result.state,
        "step": step,
        "product": None if eta is None else abs(eta - end) / to_go,
        "naive": abs(naive - end) / to_go,
        "actual_to_go_simulated_s": round(to_go, 1),
    }


def measure_all(tmp: Path) -> dict[str, dict[str, Any]]:
    on = {f: fault_run(tmp / "on" / f, f, {}) for f in FAULTS}
    off = {f: fault_run(tmp / "off" / f, f, RULES_OFF) for f in FAULTS}
    etas = [eta_errors(tmp / f"eta-{seed}", seed) for seed in ETA_SEEDS]
    runs = {"watchdog_on": _dicts(on), "rules_off": _dicts(off)}
    problems = [
        f"{side} {f}: {r.leftovers}"
        for side, found in (("on", on), ("off", off))
        for f, r in found.items()
        if r.leftovers
    ]
    problems += [f"on {f}: no health rule fired" for f, r in on.items() if r.rule is None]
    return {
        "health_detect_latency_s": _nan_latency(on["nan"], off["nan"], problems),
        "stall_detect_s": _stall(on["stall"], off["stall"], problems),
        "tpu_hours_after_fault": _hours(on, off, runs, problems),
        "poisoned_exports": _poisoned(on, off, problems),
        "eta_error_at_10pct": _eta(etas),
    }


def _dicts(found: dict[str, FaultRun]) -> dict[str, Any]:
    return {f: r.as_dict() for f, r in found.items()}


def _with(m: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    m["details"]["problems"] = problems
    m["goal_met"] = m["goal_met"] and not problems
    return m


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _wall(value: float | None) -> float:
    return float("inf") if value is None else value


def _latency(
    value: float | None,
    baseline: float | None,
    goal: float,
    baseline_is: str,
    details: dict[str, Any],
    problems: list[str],
) -> dict[str, Any]:
    """Wall seconds from the fault's line to an end, rules on (`value`) against off."""
    return _with(
        metric(
            _wall(value),
            _wall(baseline),
            unit="s",
            goal=round(goal, 3),
            baseline_is=baseline_is,
            details={**details, "time_scale": TIME_SCALE},
        ),
        problems,
    )


def _nan_latency(on: FaultRun, off: FaultRun, problems: list[str]) -> dict[str, Any]:
    step_wall = on.median_step_s * TIME_SCALE
    details = {
        "from": f"the `Train step {FAULT_AT} training loss: nan` line (the client's log)",
        "to": "the last TPU pod running at that line ended (Job and backend deleted)",
        "goal_is": f"one median step interval ({step_wall:.3f} s) plus a poll ({POLL_S} s)",
    }
    baseline_is = "the same NaN run with every health rule off: training goes on to Post"
    goal = step_wall + POLL_S
    return _latency(on.latency_wall_s(), off.latency_wall_s(), goal, baseline_is, details, problems)


def _stall(on: FaultRun, off: FaultRun, problems: list[str]) -> dict[str, Any]:
    step_wall = on.median_step_s * TIME_SCALE
    floor_wall = RUN["health_stall_floor_minutes"] * 60
    details = {
        "from": f"the last step line before the silence (step {FAULT_AT - 1})",
        "to": "the reward wait's end: its stall verdict (with the rules off, the Job's deadline)",
        "tpus_released_after_s": {"on": _rounded(on.latency_wall_s())},
        "goal_is": (
            f"max({STALL_FACTOR:g} x the median step interval {step_wall:.3f} s, the "
            f"floor {floor_wall:.2f} s) plus a poll ({POLL_S} s)"
        ),
        "floor_is": f"health_stall_floor_minutes' default {STALL_FLOOR_MIN:g} min, scaled",
    }
    baseline_is = (
        "the same stalled run with every health rule off: the wait ends at the training Job's "
        f"deadline (training_timeout_minutes {TRAINING_LIMIT_MIN}, simulated)"
    )
    goal = max(STALL_FACTOR * step_wall, floor_wall) + POLL_S
    return _latency(on.detect_wall_s(), off.detect_wall_s(), goal, baseline_is, details, problems)


def _hours(
    on: dict[str, FaultRun], off: dict[str, FaultRun], runs: dict[str, Any], problems: list[str]
) -> dict[str, Any]:
    hours = sum(r.chip_s_after for r in on.values()) / 3600
    baseline = sum(r.chip_s_after for r in off.values()) / 3600
    return _with(
        metric(
            hours,
            baseline,
            unit="chip-h",
            goal=round(baseline, 4),
            baseline_is="the same fault runs with every health rule off (training on to its end)",
            details={
                "value_is": (
                    "chip-hours the TPU pods running at each fault's line ran after it, summed "
                    f"over the {len(on)} faults (simulated hours; a v6e-32 slice is 32 chips)"
                ),
                "goal_is": "below the baseline",
                "runs": runs,
            },
        ),
        problems,
    )


def _poisoned(
    on: dict[str, FaultRun], off: dict[str, FaultRun], problems: list[str]
) -> dict[str, Any]:
    return _with(
        metric(
            sum(r.poisoned for r in on.values()),
            sum(r.poisoned for r in off.values()),
            unit="runs",
            goal=0,
            baseline_is="the same fault runs with every health rule off",
            details={
                "faults": sorted(on),
                "exported_on": {f: r.exported for f, r in on.items()},
                "exported_off": {f: r.exported for f, r in off.items()},
            },
        ),
        problems,
    )


def _eta(etas: list[dict[str, Any]]) -> dict[str, Any]:
    problems = [f"seed {e['seed']}: run {e['state']}" for e in etas if e["state"] != "success"]
    worst = max(_wall(e["product"]) for e in etas)
    return _with(
        metric(
            worst,
            max(e["naive"] for e in etas),
            unit="ratio",
            goal=ETA_GOAL,
            baseline_is=(
                "time since the training pod started / steps done x the steps (what a person "
                "reading kubectl logs estimates), at the same step"
            ),
            details={
                "value_is": (
                    "|ETA - the last step line's time| / the time still to go, at the first "
                    f"step line at or past 10% of {ETA_BATCHES} steps; worst of {len(etas)} runs"
                ),
                "step_times": (
                    f"{STEP_S:g} s +-{VARIED_JITTER:.0%}, one step in {VARIED_SLOW_EVERY} "
                    "1.6x slow, a checkpoint save every 25 steps"
                ),
                "runs": etas,
            },
        ),
        problems,
    )
