"""The names the run's objects and operators share: the steps are one StrEnum of task ids."""

from __future__ import annotations

import json
from enum import StrEnum

from tests.run_steps import RUN_STEPS
from tpu_rl.names import Step


def test_each_step_is_its_task_id_as_a_str():
    assert issubclass(Step, StrEnum)
    assert Step("gate") is Step.GATE  # a task id read back (an XCom, a URL) names its step
    assert Step.GATE == "gate" and {"gate": 1}[Step.GATE] == 1
    assert f"{Step.GATE}.yaml" == "gate.yaml"
    assert json.dumps({"id": Step.GATE}) == '{"id": "gate"}'


def test_every_step_has_one_operator_and_gives_airflow_a_plain_str_task_id():
    assert sorted(step.step_id for step in RUN_STEPS) == sorted(Step)
    task = RUN_STEPS[0]()  # validate: a Python step that needs no arguments
    assert type(task.task_id) is str and task.task_id == Step.VALIDATE
