"""RewardSensor built as the tests of the sensor build it: the task state store that outlives its
tries, a task instance's first reschedule, the sensor on the Kubernetes API emulator's Job."""

from __future__ import annotations

from typing import Any

from tests.support.kube_wait import JOB, NS
from tpu_rl.rewards.sensor import RewardSensor


class StateStore:
    """The task state store: survives retries, reschedules and deferrals of one task."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


class FakeTI:
    """A task instance: its first reschedule date."""

    def __init__(self, first_reschedule: Any = None) -> None:
        self.first_reschedule = first_reschedule

    def get_first_reschedule_date(self, context: Any) -> Any:
        return self.first_reschedule


def sensor(**kwargs: Any) -> RewardSensor:
    """The sensor of the emulator's Job `JOB` in `NS`, polling every 50 ms, 60 s in total."""
    args: dict[str, Any] = {
        "task_id": "rewards",
        "project_id": "demo-project",
        "location": "us-east5",
        "cluster_name": "gemma4-rl",
        "job_name": JOB,
        "namespace": NS,
        "poll_interval": 0.05,
        "timeout": 60,
    }
    args.update(kwargs)
    return RewardSensor(**args)


def context(store: StateStore | None = None, ti: FakeTI | None = None) -> dict[str, Any]:
    """A task's context: its task instance and, when given, its state store."""
    ctx: dict[str, Any] = {"ti": ti or FakeTI()}
    if store is not None:
        ctx["task_state_store"] = store
    return ctx
