"""The training health watchdog's rules on the run's TensorBoard event files, end to end (issue
46): a KL blow-up, which no log line shows (Tunix writes actor/train/kl to TensorBoard only),
and a reward-spread collapse (every completion of a batch scoring the same, so GRPO's advantages
are all 0: TensorBoard's score max equal to its min), each stop training within a poll of its
event file's flush (the Job and the backend deleted, nothing left), nothing poisoned is
exported, and the run names the rule, the step, the event file's evidence and the healthy
checkpoint. Before the event files were read, the runs trained
on to their Post line and exported the poisoned step 100."""

from __future__ import annotations

from sandbox.harness import Workloads
from sandbox.training_curve import TrainingFaults
from tests.e2e.test_training_health import HEALTH, _health_event, _no_poisoned_export

KL_AT = 45
FLAT_AT = 42
FLAT_STEPS = 8  # health_reward_spread_steps: the default 20 is longer than this short run needs


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


def test_a_reward_spread_collapse_stops_training_and_exports_nothing(sandbox):
    faults = TrainingFaults(reward_spread_collapse_at_step=FLAT_AT)
    conf = {**HEALTH, "health_reward_spread_steps": FLAT_STEPS}  # health_action: stop
    result = sandbox.run(conf, Workloads(train_faults=faults))
    _no_poisoned_export(result, faults)  # before: step 100 exported
    assert result.state == "failed", result.why()
    event = _health_event(result)
    anomaly = event["anomaly"]
    assert anomaly["rule"] == "reward_std_collapse"
    # global step k's rewards are at TensorBoard step k - 1 (grpo_learner.py:376-403)
    assert anomaly["anomaly_step"] == FLAT_AT - 1
    assert anomaly["step"] == FLAT_AT - 1 + FLAT_STEPS - 1
    assert "rewards/train/score/max=" in event["message"]
    assert "events.out.tfevents." in event["message"]
    kept = result.xcoms["wait_for_rewards.anomaly"]
    assert kept["healthy_step"] < FLAT_AT - 1
    assert result.task_states["export"] != "success"
    assert max(c.step for c in result.ledger.checkpoints) < 100
    assert result.leftovers == []
