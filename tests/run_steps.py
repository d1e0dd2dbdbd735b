"""The run's steps in Step's order, found from the operators' own declarations (no second
list), and their time limits by task id (each operator's `step_id` and `limit`): what the tests
hold the DAG and the run's time budget against without parsing the DAG file (the budget itself
reads each task's `limit` where a task runs)."""

from __future__ import annotations

import importlib
import pkgutil

import tpu_rl.operators
from tpu_rl.dag.limits import WORK, Limit
from tpu_rl.names import Step
from tpu_rl.operators.run_step import RunStep


def run_steps() -> tuple[type[RunStep], ...]:
    """Every operator class with a step of the run (tpu_rl.names.Step), in Step's order: the
    operators' own declarations, found by importing each module of tpu_rl.operators."""
    for module in pkgutil.iter_modules(tpu_rl.operators.__path__):
        importlib.import_module(f"tpu_rl.operators.{module.name}")
    found, todo = set(), [RunStep]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__dict__.get("step_id") in set(Step):
                found.add(sub)
    return tuple(sorted(found, key=lambda step: list(Step).index(step.step_id)))


RUN_STEPS = run_steps()

LIMITS: dict[str, Limit] = {step.step_id: step.limit for step in RUN_STEPS}
WORK_LIMITS = {task: limit for task, limit in LIMITS.items() if limit.role == WORK}
