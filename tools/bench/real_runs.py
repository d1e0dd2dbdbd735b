"""The training watchdog on the corpus of real GRPO runs (sandbox/corpus, recorded
from Tunix's real trainer by `make corpus`), replayed through the follower and the watchdog
(sandbox.trainer_corpus.watch) at the run settings' defaults.

- false_stops_on_real_runs: runs without a fault the watchdog stopped. Goal 0. Baseline: the
  same runs with the loss spike rule without its floor (health_spike_floor 0: a spike
  is a multiple of the median magnitude alone), same rules otherwise.
- real_fault_detection_lag_steps: for each real fault, steps from the one whose output first
  shows it (sandbox.trainer_corpus.shows_at) to the step line the log had reached when the
  watchdog fired; the worst of the faults. Goal: the event-file rules' flush period
  (log_period), the latency the README states; the step-line rules fire on the line itself.
  Baseline: every rule off (no fault is caught: infinite). Details give each fault's rule,
  steps and the lag in the real run's seconds.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from sandbox.trainer_corpus import CorpusRun, default_rules, line_time, runs, shows_at, watch
from tools.bench.metric import metric
from tpu_rl.watch import health


def _false_stops(healthy: list[CorpusRun], rules: health.Rules) -> dict[str, str]:
    return {r.name: v.rule for r in healthy if (v := watch(r, rules)).rule is not None}


def _detection(run: CorpusRun, rules: health.Rules) -> dict[str, Any]:
    verdict = watch(run, rules)
    shown = shows_at(run)
    if verdict.anomaly is None:
        return {"rule": None, "shows_at_step": shown, "lag_steps": math.inf}
    # a stall is judged on silence: its verdict comes with no newer line
    caught = verdict.seen_step if run.fault["kind"] != "stall" else shown
    shown_at = line_time(run, shown) or line_time(run, shown - 1)
    lag_s = None if shown_at is None or verdict.at is None else round(verdict.at - shown_at, 3)
    return {
        "rule": verdict.rule,
        "shows_at_step": shown,
        "caught_at_step": caught,
        "lag_steps": max(caught - shown, 0),
        "lag_s": lag_s,
        "anomaly_step": verdict.anomaly["anomaly_step"],
    }


def measure() -> dict[str, dict[str, Any]]:
    corpus = runs()
    healthy = [r for r in corpus if r.fault is None]
    faults = [r for r in corpus if r.fault is not None]
    rules = default_rules()
    stopped = _false_stops(healthy, rules)
    before = _false_stops(healthy, dataclasses.replace(rules, spike_floor=0.0))
    found = {r.name: _detection(r, rules) for r in faults}
    off = dataclasses.replace(
        rules,
        nonfinite_loss=False,
        spike_factor=0.0,
        stall_factor=0.0,
        reward_drop=0.0,
        kl_factor=0.0,
        reward_spread_steps=0,
    )
    baseline = max(_detection(r, off)["lag_steps"] for r in faults)
    period = max(r.log_period for r in corpus)
    worst = max(d["lag_steps"] for d in found.values())
    return {
        "false_stops_on_real_runs": metric(
            len(stopped),
            len(before),
            unit="runs",
            goal=0,
            baseline_is="the loss spike rule without its floor (health_spike_floor 0), same runs",
            details={"runs": len(healthy), "stopped": stopped, "baseline_stopped": before},
        ),
        "real_fault_detection_lag_steps": metric(
            worst,
            baseline,
            unit="steps",
            goal=period,
            baseline_is="every health rule off: no real fault is caught",
            details={"faults": found, "log_period": period},
        ),
    }
