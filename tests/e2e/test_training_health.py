"""The training health watchdog end to end (issue 46): a NaN loss and a stall stop training at
once (the Job and the backend deleted, nothing left), nothing poisoned is exported, and the
run says which rule, which step and which checkpoint is healthy. Before the watchdog, the NaN
run trained on to its Post line and exported; the stalled one waited out its time limit."""

from __future__ import annotations

from sandbox.harness import SETTINGS, Workloads
from sandbox.training_curve import TrainingFaults

HEALTH = {**SETTINGS, "num_batches": 100, "checkpoint_period": 10}
NAN_AT = 35
STALL_AT = 45


def _health_event(result) -> dict:
    ends = [e for e in result.trigger_events if e.get("reason") == "training_unhealthy"]
    assert ends, result.why()
    return ends[0]


def test_a_nan_loss_stops_training_and_exports_nothing(sandbox):
    faults = TrainingFaults(nan_at_step=NAN_AT)
    result = sandbox.run({**HEALTH, "health_action": "stop"}, Workloads(train_faults=faults))
    assert result.state == "failed", result.why()
    event = _health_event(result)
    assert event["anomaly"]["rule"] == "nonfinite_loss"
    assert event["anomaly"]["step"] == NAN_AT
    assert f"Train step {NAN_AT} training loss: nan" in event["message"]
    anomaly = result.xcoms["wait_for_rewards.anomaly"]
    assert anomaly["anomaly_step"] == NAN_AT
    assert anomaly["healthy_step"] == 30  # the newest save before step 35, still on disk
    assert anomaly["healthy_checkpoint"].endswith("/30/")
    assert result.task_states["export"] != "success"
    assert "export.checkpoint_step" not in result.xcoms
    # stopped within a poll: training never saved its last step
    assert max(c.step for c in result.ledger.checkpoints) < 100
    assert result.leftovers == []


def test_export_healthy_exports_the_newest_checkpoint_before_the_nan(sandbox):
    faults = TrainingFaults(nan_at_step=NAN_AT)
    conf = {**HEALTH, "health_action": "export_healthy", "min_reward_gain": -100.0}
    result = sandbox.run(conf, Workloads(train_faults=faults))
    _health_event(result)
    assert result.xcoms.get("export.checkpoint_step") == 30, result.why()
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
