"""health_action=resume end to end: a NaN loss stops training, its poisoned save is
moved to the run's quarantine folder, training resumes once from the newest healthy checkpoint
(starting over from the converted checkpoint when none is healthy) and completes, with nothing
left. Before resume existed, validation refused health_action=resume. That a fault that comes
back fails the wait at the second anomaly instead of resuming again is the reward sensor's
decision: tests/unit/operators/test_training_resume.py."""

from __future__ import annotations

from sandbox.harness import SETTINGS, Workloads
from sandbox.training_curve import TrainingFaults

HEALTH = {**SETTINGS, "num_batches": 100, "checkpoint_period": 10, "health_action": "resume"}
# save 40 commits during update 40, before Tunix logs step 40's line (one update late): a
# poisoned save on the bucket when the watchdog stops training
NAN_AT = 40
EARLY_NAN_AT = 5  # before the first save (checkpoint_period 10): no healthy checkpoint


def _health_events(result) -> list[dict]:
    return [e for e in result.trigger_events if e.get("reason") == "training_unhealthy"]


def _committed(result, step: int) -> list:
    return [c for c in result.ledger.checkpoints if c.step == step]


def test_a_transient_nan_resumes_once_from_the_healthy_checkpoint_and_completes(sandbox):
    faults = TrainingFaults(nan_at_step=NAN_AT, first_attempt_only=True)
    conf = {**HEALTH, "min_reward_gain": -100.0}
    result = sandbox.run(conf, Workloads(train_faults=faults))
    assert result.state == "success", result.why()
    events = _health_events(result)
    # the nan of step 40's line came from the weights of 39 updates: nothing from 39 on is trusted
    assert len(events) == 1 and events[0]["anomaly"]["anomaly_step"] == NAN_AT - 1
    assert events[0]["action"] == "resume"
    anomaly = result.xcoms["wait_for_rewards.anomaly"]
    assert (anomaly["healthy_step"], anomaly["action"]) == (30, "resume")
    # the second attempt restored step 30, not the poisoned 40
    runs = [a for a in result.ledger.attempts if a.run_name == result.ledger.attempts[0].run_name]
    assert [a.restored_step for a in runs] == [None, 30]
    attempts = result.xcoms["wait_for_rewards.attempts"]
    resumed = attempts[-1]["health_resume"]
    # every save at or after the anomaly step is moved (training_resume.quarantine_poisoned):
    # the NaN's own save, and those the first attempt committed before its stop landed (on a
    # loaded machine the stop can land after save 50 or 60: [40, 50, 60] is as right as [40])
    poisoned = sorted(result.ledger.poisoned_steps(runs[0].run_name))
    assert poisoned[0] == NAN_AT, poisoned
    assert attempts[-1]["resumed_from_step"] == 30 and resumed["moved"] == poisoned
    assert resumed["quarantine"].endswith("/quarantine/")
    # the poisoned save now lives in the quarantine folder only
    bucket, _, prefix = resumed["quarantine"].removeprefix("gs://").partition("/")
    quarantined = result.gcs.names(bucket, prefix)
    assert f"{prefix}{NAN_AT}/commit_success.txt" in quarantined
    # the export is a step the resumed attempt saved, never a poisoned one
    step = result.xcoms["export.checkpoint_step"]
    newest = _committed(result, step)[-1]
    assert not newest.poisoned and newest.committed > _committed(result, NAN_AT)[0].committed
    assert result.leftovers == []


def test_a_nan_before_any_healthy_save_starts_over_from_the_converted_checkpoint(sandbox):
    """With no healthy save yet, health_action=resume does not end the run as stop does: it
    promises a resume. Training starts over on the same slice: the saves made since
    are moved away, the new attempt loads the converted checkpoint and completes."""
    faults = TrainingFaults(nan_at_step=EARLY_NAN_AT, first_attempt_only=True)
    conf = {**HEALTH, "min_reward_gain": -100.0}
    result = sandbox.run(conf, Workloads(train_faults=faults))
    assert result.state == "success", result.why()
    assert [e["action"] for e in _health_events(result)] == ["resume"]
    anomaly = result.xcoms["wait_for_rewards.anomaly"]
    assert (anomaly["healthy_step"], anomaly["action"]) == (None, "resume")
    runs = [a for a in result.ledger.attempts if a.run_name == result.ledger.attempts[0].run_name]
    assert [a.restored_step for a in runs] == [None, None]  # both from the converted checkpoint
    attempts = result.xcoms["wait_for_rewards.attempts"]
    assert attempts[-1]["resumed_from_step"] is None
    assert attempts[-1]["health_resume"]["moved"] == sorted(
        result.ledger.poisoned_steps(runs[0].run_name)
    )
    step = result.xcoms["export.checkpoint_step"]
    assert step == HEALTH["num_batches"] and not _committed(result, step)[-1].poisoned
    assert result.leftovers == []
