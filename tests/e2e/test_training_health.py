"""The training health watchdog end to end, one whole run per path a fatal rule takes:
health_action=stop stops training at once (the Job and the backend deleted, nothing left),
exports nothing and says which rule, which step and which checkpoint is healthy;
export_healthy exports the newest checkpoint before the anomaly and the note says so; a rule
on the TensorBoard event files (a KL blow-up, which no log line shows) stops training from the
files the run's own pods wrote. Before the watchdog, these runs trained on to their Post line
and exported their poisoned step 100. health_action=resume: test_training_health_resume.py.

Each rule's verdict on the sandbox's faults (inf, a loss spike, a reward collapse, a stall,
slow steps, a reward-spread collapse), the step and the checkpoint kept, is proven in
milliseconds by tests/unit/watch/test_health.py (the sandbox's client replayed through the
watch); the follower's stall on a silent running pod by tests/integration/
test_reward_trigger.py and, a whole run again, tests/processes/test_training_health.py."""

from __future__ import annotations

import logging

from sandbox.harness import SETTINGS, Workloads, logged_note
from sandbox.training_curve import TrainingFaults
from tpu_rl.watch.health import next_step

HEALTH = {**SETTINGS, "num_batches": 100, "checkpoint_period": 10}
NAN_AT = 35
KL_AT = 45


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
    # the early stop's line is whole and ends with what to do next; the first attempt
    # was stopped by the watchdog, not "failed", in a run that succeeded
    [stopped] = [part for part in note.split("\n\n") if part.startswith("Training stopped")]
    anomaly = result.xcoms["wait_for_rewards.anomaly"]
    assert stopped.endswith(next_step(anomaly)) and "(cut:" not in note, note
    attempts = result.xcoms["wait_for_rewards.return_value"]["attempts"]
    assert [a["outcome"] for a in attempts] == ["stopped_by_watchdog"]
    assert result.leftovers == []


def test_a_kl_blow_up_in_the_event_files_stops_training_and_exports_nothing(sandbox):
    faults = TrainingFaults(kl_blowup_at_step=KL_AT)
    result = sandbox.run(HEALTH, Workloads(train_faults=faults))  # health_action: stop
    _no_poisoned_export(result, faults)  # before the event files were read: step 100 exported
    assert result.state == "failed", result.why()
    event = _health_event(result)
    anomaly = event["anomaly"]
    assert anomaly["rule"] == "kl_blowup"
    assert anomaly["step"] >= KL_AT  # the first blown-up value the reader saw
    assert anomaly["anomaly_step"] == anomaly["step"] - 1
    assert "events.out.tfevents." in event["message"]
    assert "actor/train/kl=" in event["message"]
    kept = result.xcoms["wait_for_rewards.anomaly"]
    assert kept["healthy_step"] < KL_AT
    assert kept["healthy_checkpoint"].endswith(f"/{kept['healthy_step']}/")
    assert result.task_states["export"] != "success"
    assert "export.checkpoint_step" not in result.xcoms
    # stopped within a poll of the flush: training never saved its last step
    assert max(c.step for c in result.ledger.checkpoints) < 100
    assert result.leftovers == []
