"""health_action=export_healthy in the reward wait and the gate: the healthy checkpoint is gated
on its own evaluation or the newest one before it, never a later step's, and the gate names the
evaluation it judged."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tests.support.wait_task import BASE_PRE, Ti
from tpu_rl.checkpoints import checkpoint_choice
from tpu_rl.dag import runtime
from tpu_rl.layout import RunLayout
from tpu_rl.operators import rewards as run_rewards
from tpu_rl.promotion.gate import candidate, reward_gate
from tpu_rl.settings.run_settings import load_settings

HEALTHY = 25  # the newest save before the anomaly (checkpoint_period 25)


@pytest.fixture
def sensor(tutorial_conf, monkeypatch, gcs_objects) -> run_rewards.WaitForRewardsSensor:
    settings = load_settings({**tutorial_conf, "health_action": "export_healthy"})
    layout = RunLayout(settings, "manual__1", "deployment")
    monkeypatch.setattr(runtime, "layout_from_context", lambda context: layout)
    monkeypatch.setattr(
        checkpoint_choice, "healthy_checkpoint", lambda uri, conn, below: (HEALTHY, f"{uri}25/")
    )
    cls = run_rewards.WaitForRewardsSensor
    for name in ("release_tpus", "mask_token", "stop_training_job"):
        monkeypatch.setattr(cls, name, lambda op: None)
    return cls(task_id="wait_for_rewards", project_id="p", location="l", cluster_name="c")


def test_the_healthy_save_is_gated_on_the_newest_evaluation_at_or_before_it(sensor):
    """The save of step 25 is not exported gated on step 40's evaluation, the newest before the
    anomaly at step 45: weights the export does not hold."""
    anomaly = {"rule": "loss_spike", "step": 45, "anomaly_step": 45, "why": "x", "evidence": []}
    event = {
        "status": "error",
        "reason": "training_unhealthy",
        "message": "Training health: loss_spike at step 45",
        "anomaly": anomaly,
        "action": "export_healthy",
        "pre": BASE_PRE,
        "intermediate": [{"step": n, "mean_reward": n / 100} for n in (10, 20, 30, 40)],
        "reached_step": 45,
    }
    result = sensor.execute_complete({"ti": Ti()}, event)
    assert result["post"] == {"step": 20, "mean_reward": 0.2}
    judged = candidate(HEALTHY, None, result["post"])  # step 25 has no evaluation of its own
    assert judged == ("step-20 (the newest evaluation at or before step 25)", result["post"])
    shown = r"step-20 \(the newest evaluation at or before step 25\) mean_reward=0\.2000 is below"
    with pytest.raises(AirflowFailException, match=shown):
        reward_gate(result, 1.0, None, judged)


def test_the_gate_names_the_step_it_judges():
    own = {"step": 30, "mean_reward": 0.3}
    assert candidate(30, own, None) == ("step-30", own)  # the exported step's own evaluation
    post = {"mean_reward": 0.5}  # the Post line: the final step's, named post-training
    assert candidate(100, post, post) is None and candidate(25, None, post) is None
