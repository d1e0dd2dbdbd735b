"""The DAG's reward sensor takes its limits from the run and names the training container."""

from __future__ import annotations

from typing import Any

from tpu_rl.dag import runtime
from tpu_rl.jobs import manifests
from tpu_rl.layout import RunLayout
from tpu_rl.operators import rewards as run_rewards
from tpu_rl.rewards.sensor import RewardSensor
from tpu_rl.settings.run_settings import load_settings


def test_the_training_container_is_named_so_a_sidecar_cannot_make_it_ambiguous(
    tutorial_conf, monkeypatch, gcs_objects
):
    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    monkeypatch.setattr(runtime, "layout_from_context", lambda context: layout)
    seen: dict[str, Any] = {}

    def fake_execute(self: RewardSensor, context: Any) -> None:
        seen.update(container=self.container_name, poll=self.poll_interval)

    monkeypatch.setattr(RewardSensor, "execute", fake_execute)
    monkeypatch.setattr(run_rewards.WaitForRewardsSensor, "ended_wait", lambda self, ctx: None)
    sensor = run_rewards.WaitForRewardsSensor(
        task_id="wait_for_rewards",
        project_id="p",
        location="us-east5",
        cluster_name="c",
        namespace="default",
        job_name="tpu-rl-train",
    )
    assert sensor.container_name is None  # as the DAG builds it
    sensor.execute({})
    assert seen == {"container": manifests.CONTAINER, "poll": 30.0}
    train_pod = manifests.train_job(layout)["spec"]["template"]["spec"]
    assert [c["name"] for c in train_pod["containers"]] == [seen["container"]]
