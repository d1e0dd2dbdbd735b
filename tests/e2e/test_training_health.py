"""The training health watchdog end to end (issue 46): a NaN or inf loss, a loss spike, a
reward collapse and a stall stop training at once (the Job and the backend deleted, nothing
left), nothing poisoned is exported, and the run says which rule, which step and which
checkpoint is healthy; slow steps are a warning only. Before the watchdog, the NaN run trained
on to its Post line and exported; the stalled one waited out its time limit; the spike and
collapse runs trained on and exported their poisoned step 100."""

from __future__ import annotations

import logging
import math
import re

from sandbox.harness import SETTINGS, Workloads, logged_note
from sandbox.training_curve import TrainingFaults
from sandbox.workloads import EvalResult
from tpu_rl.watch.health import next_step

HEALTH = {**SETTINGS, "num_batches": 100, "checkpoint_period": 10}
NAN_AT = 35
STALL_AT = 45
SPIKE_AT = 45
COLLAPSE_AT = 30  # an Intermediate Eval's step (eval_interval 10)
SLOW_FROM = 90
# GSM8K's mean_reward adds several rewards of up to 3 each: a collapse of 1.5 passes the
# default health_reward_drop of 1.0 (tpu_rl.watch.health)
REWARDING = {
    "pre": EvalResult(corr=8, mean_reward=0.5),
    "post": EvalResult(corr=12, mean_reward=2.5),
}


def _health_event(result) -> dict:
    ends = [e for e in result.trigger_events if e.get("reason") == "training_unhealthy"]
    assert ends, result.why()
    return ends[0]


def _no_poisoned_export(result, faults: TrainingFaults) -> None:
    """Nothing at or after the fault's first poisoned step was exported."""
    exported = result.xcoms.get("export.checkpoint_step")
    assert exported is None or exported < faults.poisoned_from(), (exported, result.why())


def test_a_nan_loss_stops_training_and_exports_nothing(sandbox):
    faults = TrainingFaults(nan_at_step=NAN_AT)
    result = sandbox.run({**HEALTH, "health_action": "stop"}, Workloads(train_faults=faults))
    assert result.state == "failed", result.why()
    event = _health_event(result)
    assert event["anomaly"]["rule"] == "nonfinite_loss"
    assert event["anomaly"]["step"] == NAN_AT
    assert f"Train step {NAN_AT} training loss: nan" in event["message"]
    anomaly = result.xcoms["wait_for_rewards.anomaly"]
    # step 35's nan came from the weights of 34 updates (Tunix logs a loss an update late)
    assert anomaly["anomaly_step"] == NAN_AT - 1
    assert anomaly["healthy_step"] == 30  # the newest save before step 34, still on disk
    assert anomaly["healthy_checkpoint"].endswith("/30/")
    assert result.task_states["export"] != "success"
    assert "export.checkpoint_step" not in result.xcoms
    # stopped within a poll: training never saved its last step
    assert max(c.step for c in result.ledger.checkpoints) < 100
    assert result.leftovers == []


def test_export_healthy_exports_the_newest_checkpoint_before_the_nan(sandbox, caplog):
    caplog.set_level(logging.INFO, logger="tpu_rl")
    faults = TrainingFaults(nan_at_step=NAN_AT)
    conf = {**HEALTH, "health_action": "export_healthy", "min_reward_gain": -100.0}
    result = sandbox.run(conf, Workloads(train_faults=faults))
    _health_event(result)
    assert result.xcoms.get("export.checkpoint_step") == 30, result.why()
    # the export's reason says it chose among the healthy steps only
    reason = result.xcoms["export.return_value"]["reason"]
    assert reason.endswith(f"before the training health anomaly at step {NAN_AT - 1}"), reason
    # the note of a run that succeeded says training stopped early, why, and what it kept
    note = logged_note(caplog.records)
    assert f". Training health: nonfinite_loss at step {NAN_AT}" in note, note
    kept = note.split("Training stopped early; kept and exported: ")[1].split(". ")[0]
    assert kept.startswith("gs://") and kept.endswith("/checkpoints/actor/30/"), note
    # issue 60: the early stop's line is whole and ends with what to do next; the first attempt
    # was stopped by the watchdog, not "failed", in a run that succeeded
    [stopped] = [part for part in note.split("\n\n") if part.startswith("Training stopped")]
    anomaly = result.xcoms["wait_for_rewards.anomaly"]
    assert stopped.endswith(next_step(anomaly)) and "(cut:" not in note, note
    attempts = result.xcoms["wait_for_rewards.return_value"]["attempts"]
    assert [a["outcome"] for a in attempts] == ["stopped_by_watchdog"]
    assert result.leftovers == []


def test_a_stall_with_the_pod_alive_stops_training(sandbox):
    faults = TrainingFaults(stall_at_step=STALL_AT)
    conf = {**HEALTH, "health_stall_floor_minutes": 0.1}  # 6 s: steps are 0.06 s apart here
    result = sandbox.run(conf, Workloads(train_faults=faults))
    assert result.state == "failed", result.why()
    event = _health_event(result)
    assert event["anomaly"]["rule"] == "stall"
    assert event["anomaly"]["step"] == STALL_AT - 1  # the last line before the silence
    assert result.xcoms["wait_for_rewards.anomaly"]["healthy_step"] == 40
    assert result.task_states["export"] != "success"
    assert result.leftovers == []


def test_an_inf_loss_stops_training_as_a_nan_does(sandbox):
    faults = TrainingFaults(nan_at_step=NAN_AT, nan_value=math.inf)
    result = sandbox.run(HEALTH, Workloads(train_faults=faults))
    assert result.state == "failed", result.why()
    event = _health_event(result)
    assert event["anomaly"]["rule"] == "nonfinite_loss"
    assert event["anomaly"]["step"] == NAN_AT
    assert f"Train step {NAN_AT} training loss: inf" in event["message"]
    assert result.xcoms["wait_for_rewards.anomaly"]["healthy_step"] == 30
    _no_poisoned_export(result, faults)
    assert result.leftovers == []


def test_a_loss_spike_stops_training_and_exports_nothing(sandbox):
    # the diverged loss of the corpus's lr-collapse run, past health_spike_floor
    faults = TrainingFaults(loss_spike_at_step=SPIKE_AT)
    result = sandbox.run(HEALTH, Workloads(train_faults=faults))
    _no_poisoned_export(result, faults)  # before the watchdog: step 100 exported
    assert result.state == "failed", result.why()
    event = _health_event(result)
    assert event["anomaly"]["rule"] == "loss_spike"
    assert event["anomaly"]["step"] == SPIKE_AT
    assert f"Train step {SPIKE_AT} training loss:" in event["message"]
    assert result.xcoms["wait_for_rewards.anomaly"]["healthy_step"] == 40
    assert result.task_states["export"] != "success"
    assert max(c.step for c in result.ledger.checkpoints) < 100
    assert result.leftovers == []


def test_a_reward_collapse_stops_training_and_keeps_the_checkpoint_before_it(sandbox):
    faults = TrainingFaults(reward_collapse_at_eval=COLLAPSE_AT, reward_collapse_by=1.5)
    result = sandbox.run(HEALTH, Workloads(train_faults=faults, **REWARDING))
    _no_poisoned_export(result, faults)  # before the watchdog: step 100 exported
    assert result.state == "failed", result.why()
    event = _health_event(result)
    assert event["anomaly"]["rule"] == "reward_collapse"
    assert event["anomaly"]["step"] == COLLAPSE_AT
    assert f"Intermediate Eval (step={COLLAPSE_AT})" in event["message"]
    anomaly = result.xcoms["wait_for_rewards.anomaly"]
    assert anomaly["healthy_step"] == 20  # step 30's save came before its evaluation's line
    assert anomaly["healthy_checkpoint"].endswith("/20/")
    assert result.leftovers == []


def test_export_healthy_exports_the_checkpoint_before_the_reward_collapse(sandbox):
    faults = TrainingFaults(reward_collapse_at_eval=COLLAPSE_AT, reward_collapse_by=1.5)
    conf = {**HEALTH, "health_action": "export_healthy"}
    result = sandbox.run(conf, Workloads(train_faults=faults, **REWARDING))
    assert _health_event(result)["anomaly"]["rule"] == "reward_collapse"
    assert result.xcoms.get("export.checkpoint_step") == 20, result.why()
    _no_poisoned_export(result, faults)
    assert result.leftovers == []


def test_slow_steps_are_a_warning_and_the_run_goes_on(sandbox, capfd):
    faults = TrainingFaults(slow_from_step=SLOW_FROM, slow_factor=6.0)  # over 3x: a warning
    result = sandbox.run(HEALTH, Workloads(train_faults=faults))
    assert result.state == "success", result.why()
    # the trigger's log (structlog, to the output in dag.test); Tunix logs a step's line one
    # step late, so the first slow interval is the one before step SLOW_FROM - 1's line
    warned = [int(n) for n in re.findall(r"Slow step: step (\d+) took", capfd.readouterr().out)]
    assert [n for n in warned if n >= SLOW_FROM - 1], warned
    assert not [e for e in result.trigger_events if e.get("reason") == "training_unhealthy"]
    assert result.xcoms.get("export.checkpoint_step") == 100
    assert result.leftovers == []
