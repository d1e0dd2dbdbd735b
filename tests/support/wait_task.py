"""The reward wait's task (tpu_rl.operators.rewards.WaitForRewardsSensor) without Airflow: its
task instance's XComs, the evaluations a run logs, a capacity-lost event, a new instance per try
and the attempts' record it keeps (the fixture `sensor` that restarts nothing is
tests/unit/conftest.py's)."""

from __future__ import annotations

from typing import Any

from tpu_rl.checkpoints import resume
from tpu_rl.operators import rewards as run_rewards


class QuietLog:
    """A log that says nothing (the follower's lines, unwanted)."""

    def info(self, *args: Any) -> None: ...

    def warning(self, *args: Any) -> None: ...


class Ti:
    """The wait's task instance: its own XComs."""

    task_id = "wait_for_rewards"

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> Any:
        assert task_ids == self.task_id
        return self.pushed.get(key)


BASE_PRE = {"mean_reward": 0.0821, "accuracy": 12.5}


RESTORED_PRE = {"mean_reward": 0.1, "accuracy": 15.0}


POST = {"mean_reward": 0.1234, "accuracy": 18.75}


RESTARTS: list[int] = []


def new_sensor() -> run_rewards.WaitForRewardsSensor:
    """The wait as a new try (or a new worker after a restart) builds it: a new instance."""
    op = run_rewards.WaitForRewardsSensor(
        task_id="wait_for_rewards", project_id="p", location="l", cluster_name="c"
    )
    op.restarts = RESTARTS  # type: ignore[attr-defined]
    return op


def saved_history(sensor: run_rewards.WaitForRewardsSensor) -> resume.History:
    """The history as the run's record in GCS holds it."""
    return resume.History.load(sensor.attempts_record)


def lost(pre: dict | None, reached: int) -> dict[str, Any]:
    return {
        "status": "error",
        "reason": "capacity_lost",
        "message": "pod w-3: DisruptionTarget TerminationByKubelet; backend failed\nlog lines",
        "pre": pre,
        "reached_step": reached,
        "backend_created": "2026-12-01T10:00:00Z",
    }
