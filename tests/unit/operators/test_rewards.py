"""A reward wait whose training Job has already ended (a retry after it) ends in its try: a
deferral that ends at its first poll can fail the resumed try (apache/airflow#72716)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import models as k8s

from tests.support.wait_task import Ti
from tpu_rl.dag import runtime
from tpu_rl.kube import objects as kube
from tpu_rl.layout import RunLayout
from tpu_rl.operators import rewards as run_rewards
from tpu_rl.rewards import poll
from tpu_rl.rewards.trigger import BACKEND_KEPT
from tpu_rl.settings.run_settings import load_settings

POST = {"mean_reward": 0.8, "accuracy": 61.0}
SUCCESS = {"status": "success", "pre": {"mean_reward": 0.5}, "post": POST, "post_time": "t"}


class FakeHook:
    """The GKE hook: the training Job in one state; the backend's delete recorded."""

    def __init__(self, condition: str | None) -> None:
        status = k8s.V1JobStatus(active=1)
        if condition:
            status.conditions = [k8s.V1JobCondition(type=condition, status="True")]
        self.job = k8s.V1Job(metadata=k8s.V1ObjectMeta(name="train"), status=status)

    def get_job_status(self, job_name: str, namespace: str) -> k8s.V1Job:
        return self.job

    def get_conn(self) -> object:
        return object()


class OnePoll:
    """LogFollower: every poll finds `event` (the training log's end); closed once."""

    event: dict[str, Any] | None = SUCCESS
    polls = 0

    def __init__(self, **kwargs: Any) -> None:
        pass

    async def poll(self) -> dict[str, Any] | None:
        OnePoll.polls += 1
        return self.event

    async def close(self) -> None:
        pass


@pytest.fixture
def sensor(tutorial_conf, monkeypatch, gcs_objects):
    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    monkeypatch.setattr(runtime, "layout_from_context", lambda context: layout)
    monkeypatch.setattr(poll, "LogFollower", OnePoll)
    monkeypatch.setattr(OnePoll, "polls", 0)
    deleted: list[str] = []
    monkeypatch.setattr(kube, "delete_backend", lambda api, ns, name: deleted.append(name) or True)
    op = run_rewards.WaitForRewardsSensor(
        task_id="wait_for_rewards", project_id="p", location="us-east5", cluster_name="c"
    )
    monkeypatch.setattr(type(op), "cluster_info", property(lambda self: ("https://k", "ca")))
    monkeypatch.setattr(op, "champion_waits", lambda layout: False)
    op.deleted = deleted
    return op


def test_a_training_job_already_ended_is_finished_without_deferring(sensor):
    sensor.__dict__["hook"] = FakeHook("Complete")
    # a TaskDeferred here: the wait deferred although it ended
    result = sensor.execute({"ti": Ti()})
    assert result["post"] == POST and OnePoll.polls == 1
    assert sensor.deleted == [sensor.backend_jobset_name]  # the TPUs go, as after the trigger


def test_a_backend_kept_for_the_champion_stays(sensor, monkeypatch):
    monkeypatch.setattr(sensor, "champion_waits", lambda layout: True)
    sensor.__dict__["hook"] = FakeHook("Complete")
    assert sensor.execute({"ti": Ti()})["post"] == POST and sensor.deleted == []
    assert sensor.ended_wait({})[BACKEND_KEPT] is True  # as the trigger marks its event


def test_a_training_job_still_running_defers_without_polling(sensor):
    from airflow.providers.common.compat.sdk import TaskDeferred

    sensor.__dict__["hook"] = FakeHook(None)
    with pytest.raises(TaskDeferred):
        sensor.execute({})
    assert OnePoll.polls == 0  # the trigger reads the log: no line relayed twice
