"""tpu_rl.dag.runtime: a task's settings, rung and deployment identity from its context."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tpu_rl.dag import runtime
from tpu_rl.run_record import SETTINGS_TASK, run_record
from tpu_rl.settings.run_settings import SettingsError, load_settings

RUN_ID = "manual__runtime"


class TaskInstance:
    """A task instance of `task_id` whose xcom_pull answers `validate`'s record."""

    def __init__(self, task_id: str, record: object = None) -> None:
        self.task_id, self.record = task_id, record

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> object:
        return self.record if task_ids == SETTINGS_TASK and key == "return_value" else None


def context(conf: dict, ti: TaskInstance) -> dict:
    return {"params": conf, "run_id": RUN_ID, "ti": ti}


def test_validate_reads_the_deployments_identity_and_later_tasks_the_recorded_one(
    tutorial_conf, monkeypatch
):
    monkeypatch.setenv("TPU_RL_DEPLOYMENT_ID", "now-deployed")
    record = run_record(load_settings(tutorial_conf).to_dict(), "recorded-deployment")
    validate = context(tutorial_conf, TaskInstance(SETTINGS_TASK))
    later = context(tutorial_conf, TaskInstance("train", record))
    assert runtime.run_deployment(validate) == "now-deployed"
    assert runtime.run_deployment(later) == "recorded-deployment"
    first, then = runtime.layout_from_context(validate), runtime.layout_from_context(later)
    assert first.run_id == then.run_id == RUN_ID
    assert first.slug != then.slug  # the slug hashes the deployment's identity


def test_a_task_of_a_run_validate_never_recorded_raises_a_settings_error(tutorial_conf):
    with pytest.raises(SettingsError, match="nothing of this run can exist"):
        runtime.run_deployment(context(tutorial_conf, TaskInstance("train")))


def test_without_a_ladder_or_in_validate_the_settings_are_the_runs_own(tutorial_conf, monkeypatch):
    from tpu_rl.cluster import rung_record

    settings = load_settings(tutorial_conf)
    monkeypatch.setattr(rung_record, "recorded_rung", lambda ti: pytest.fail("read a rung"))
    assert runtime.on_current_rung(settings, {"ti": TaskInstance("train")}) is settings
    laddered = SimpleNamespace(capacity_ladder="spot@us-east5-a")
    assert runtime.on_current_rung(laddered, {"ti": TaskInstance(SETTINGS_TASK)}) is laddered
