"""The training health watchdog's rules on the run's TensorBoard event files, end to end (issue
46): a KL blow-up, which no log line shows (Tunix writes actor/train/kl to TensorBoard only),
stops training within a poll of its event file's flush (the Job and the backend deleted,
nothing left), nothing poisoned is exported, and the run names the rule, the step, the event
file's evidence and the healthy checkpoint. Before the event files were read, the run trained
on to its Post line and exported its poisoned step 100."""

from __future__ import annotations

from sandbox.harness import Workloads
from sandbox.training_curve import TrainingFaults
from tests.e2e.test_training_health import HEALTH, _health_event, _no_poisoned_export

KL_AT = 45


def test_a_kl_blow_up_stops_training_and_exports_nothing(sandbox):
    faults = TrainingFaults(kl_blowup_at_step=KL_AT)
    result = sandbox.run(HEALTH, Workloads(train_faults=faults))  # health_action: stop
    _no_poisoned_export(result, faults)  # before: step 100 exported
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


def test_export_healthy_exports_the_newest_checkpoint_before_the_kl_blow_up(sandbox):
    faults = TrainingFaults(kl_blowup_at_step=KL_AT)
    conf = {**HEALTH, "health_action": "export_healthy", "min_reward_gain": -100.0}
    result = sandbox.run(conf, Workloads(train_faults=faults))
    assert _health_event(result)["anomaly"]["rule"] == "kl_blowup"
    _no_poisoned_export(result, faults)
    assert result.xcoms.get("export.checkpoint_step") == 40, result.why()
    assert result.leftovers == []
