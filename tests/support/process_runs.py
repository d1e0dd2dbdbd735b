"""What the process scenarios (tests/processes) wait for in the deployment's logs, in place of
fixed sleeps: a line the trigger logged in a task's log, the scheduler's read of a task's exit."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sandbox.harness import SETTINGS
from sandbox.processes.api import wait_until
from sandbox.processes.deployment import Deployment
from sandbox.processes.runs import Run, wait_for_event
from sandbox.vertex_api import VertexRegistryFake

POLL_S = 0.1  # reading a few log files: far cheaper than the API's polls (sandbox.processes.api)
MODEL_ID = "gemma-rl"  # the deployer's Vertex AI registry model
IMAGE = "us-docker.pkg.dev/serving/vllm@sha256:" + "b" * 64


def registry_env(d: Deployment, vertex: VertexRegistryFake) -> dict[str, dict[str, str]]:
    """The deployer's registry settings, for the scheduler: with LocalExecutor the task
    processes are its children, with its environment."""
    endpoints = json.loads(d.processes.env["TPU_RL_API_ENDPOINTS"])
    endpoints |= vertex.endpoint_for(SETTINGS["region"])
    return {
        "scheduler": {
            "TPU_RL_VERTEX_REGISTRY": MODEL_ID,
            "TPU_RL_VERTEX_SERVING_IMAGE": IMAGE,
            "TPU_RL_API_ENDPOINTS": json.dumps(endpoints),
        }
    }


def _task_logs(d: Deployment, run: Run, task_id: str) -> list[Path]:
    """The task's log files (sandbox.processes.runs.task_log reads the same)."""
    return [
        p
        for folder in d.log_dir.rglob(f"run_id={run.run_id}")
        for p in folder.rglob("*")
        if f"task_id={task_id}" in str(p) and p.is_file()
    ]


def wait_for_task_line(d: Deployment, run: Run, task_id: str, text: str) -> None:
    """Until the task's logs (the triggerer's lines included) hold `text`. The reward wait says
    what it read once its position is saved on the Job (tpu_rl.rewards.held_log): a line of it
    logged is a line a rebuilt trigger does not read again."""
    wait_until(
        f"{task_id} to log {text!r}",
        lambda: any(text in p.read_text(errors="replace") for p in _task_logs(d, run, task_id)),
        poll_s=POLL_S,
    )


def wait_for_exit_read(d: Deployment, run: Run, task_id: str) -> None:
    """Until the scheduler has read the executor's event of the task's exit (it logs `Received
    executor event with state success for task instance TaskInstanceKey(...)`, Airflow's
    jobs/scheduler_job_runner.py, process_executor_events; LocalExecutor's event of a try that
    deferred is `success`, its `running` one came when the try started)."""
    key = re.compile(
        r"Received executor event with state (success|failed) for task instance TaskInstanceKey\("
        rf"dag_id='[^']+', task_id='{re.escape(task_id)}', run_id='{re.escape(run.run_id)}'"
    )
    wait_until(
        f"the scheduler to read {task_id}'s exit",
        lambda: any(
            key.search(p.read_text(errors="replace")) for p in d.log_dir.glob("scheduler.*.log")
        ),
        poll_s=POLL_S,
    )


def release_after_the_deferral(d: Deployment, run: Run) -> None:
    """Release the run's held training once its reward wait deferred and the scheduler read that
    try's exit: a trigger firing before that read meets apache/airflow#72716 (the resumed try
    RUNNING when the scheduler reads the deferring try's exit fails the task)."""
    api = d.api()
    wait_for_event(api, run, run.training_held, "training's first evaluation")
    api.wait_task(run.run_id, "wait_for_rewards", {"deferred"})
    wait_for_exit_read(d, run, "wait_for_rewards")
    run.training_released.set()
