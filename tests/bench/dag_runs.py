"""Detection latencies and TPU idle time from whole DAG runs in the sandbox.

Times come from three clocks, all epoch seconds: the emulator's change feed (ChangeClock,
a few ms late at most), the Post line's own log timestamp, and the TaskInstance start and
end dates in Airflow's database.

Baselines are computed from the same run's times:
- detection: a provider-style wait (GKEStartJobOperator) polls the Job's status every
  `job_poll_interval` (its default) from the Job's creation and reads the result after the
  Job completes or fails; everything after detection is taken as in our run.
- TPU idle: a DAG that deletes the backend only at cleanup_kubernetes.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.providers.google.cloud.operators.kubernetes_engine import GKEStartJobOperator

from tests.bench.metric import metric
from tests.bench.observe import Change, ChangeClock
from tests.sandbox.controller import Controller
from tests.sandbox.harness import (
    DAG_ID,
    SETTINGS,
    RunResult,
    Sandbox,
    Workloads,
    build_scenario,
)

PROVIDER_POLL_S: float = (
    inspect.signature(GKEStartJobOperator.__init__).parameters["job_poll_interval"].default
)
SLACK_S = 2.0
# Training takes about 6 s of wall time (the harness's 0.001 gives 3 s, about as long as
# Airflow takes to start the sensor after `train`); a failure comes at step 40, about 5 s.
TIME_SCALE = 0.002
FAIL_AT_STEP = 40


@dataclass
class Run:
    """One finished DAG run and what the clocks saw during it."""

    result: RunResult
    clock: ChangeClock
    tasks: dict[str, tuple[float, float]]  # task_id -> (start, end), epoch seconds

    @property
    def job(self) -> str:
        return self.result.xcoms["train.job_name"]

    @property
    def jobset(self) -> str:
        return self.result.xcoms["start_backend.return_value"]

    def job_change(self, when: Callable[[Change], bool]) -> float:
        return self.clock.first("jobs", lambda c: c.name == self.job and when(c))

    def train_pod(self, phases: tuple[str, ...]) -> float:
        return self.clock.first(
            "pods", lambda c: c.labels.get("job-name") == self.job and c.phase in phases
        )

    def jobset_change(self, type_: str) -> float:
        return self.clock.first("jobsets", lambda c: c.name == self.jobset and c.type == type_)

    def provider_detects(self, done_at: float) -> float:
        """When a wait polling the Job every PROVIDER_POLL_S from its creation sees it done."""
        created = self.job_change(lambda c: c.type == "ADDED")
        return created + math.ceil((done_at - created) / PROVIDER_POLL_S) * PROVIDER_POLL_S


def task_dates(run_id: str) -> dict[str, tuple[float, float]]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=DAG_ID, run_id=run_id).all()
        return {
            ti.task_id: (ti.start_date.timestamp(), ti.end_date.timestamp())
            for ti in tis
            if ti.start_date and ti.end_date
        }


def full_run(tmp: Path, workloads: Workloads) -> Run:
    """Sandbox.run with a slower clock, so the sensor is waiting when training ends."""
    from airflow.dag_processing.dagbag import DagBag

    tmp.mkdir()
    conf = dict(SETTINGS)
    with Sandbox(tmp).up() as box, ChangeClock(box.emu) as clock:
        dag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).dags[DAG_ID]
        with Controller(box.emu, build_scenario(conf, box.gcs, workloads), time_scale=TIME_SCALE):
            dag_run = dag.test(run_conf=conf)
        result = box.result(dag_run)
    return Run(result, clock, task_dates(result.run_id))


def epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def is_done(change: Change) -> bool:
    return change.has_condition("Complete") or change.has_condition("Failed")


def latency(run: Run, event_at: float, done_at: float, what: str) -> dict[str, Any]:
    """Latency from an event to the sensor's end and to cleanup's start, ours and baseline."""
    sensor_end = run.tasks["wait_for_rewards"][1]
    cleanup_start = run.tasks["cleanup_kubernetes"][0]
    provider = run.provider_detects(done_at)
    provider_cleanup = provider + cleanup_start - sensor_end
    goal = float(SETTINGS["poll_interval_seconds"]) + SLACK_S
    return metric(
        sensor_end - event_at,
        provider - event_at,
        unit="s",
        goal=goal,
        baseline_is=(
            f"provider-style wait: the Job's status polled every {PROVIDER_POLL_S:g} s, "
            "the result read once the Job is done"
        ),
        details={
            "from": what,
            "sensor_waiting_before_event_s": round(event_at - run.tasks["wait_for_rewards"][0], 3),
            "to_sensor_end_s": round(sensor_end - event_at, 3),
            "to_cleanup_start_s": round(cleanup_start - event_at, 3),
            "baseline_to_cleanup_start_s": round(provider_cleanup - event_at, 3),
            "job_done_after_event_s": round(done_at - event_at, 3),
            # the baseline depends on where its 10 s ticks fall: over all phases
            "baseline_mean_over_phases_s": round(done_at - event_at + PROVIDER_POLL_S / 2, 3),
            "baseline_worst_s": round(done_at - event_at + PROVIDER_POLL_S, 3),
            "goal": f"one poll interval ({SETTINGS['poll_interval_seconds']} s) + {SLACK_S:g} s",
        },
    )


def reward_latency(run: Run) -> dict[str, Any]:
    post_at = epoch(run.result.xcoms["wait_for_rewards.return_value"]["post_time"])
    entry = latency(run, post_at, run.job_change(is_done), "the Post line's log timestamp")
    entry["details"]["note"] = (
        "the goal is judged at the sensor's end: in a successful run, stop_backend, gate, "
        "export and verify run before cleanup"
    )
    return entry


def failure_latency(run: Run) -> dict[str, Any]:
    failed_at = run.job_change(lambda c: c.has_condition("Failed"))
    entry = latency(run, failed_at, failed_at, "the training Job's Failed condition (set)")
    to_cleanup = entry["details"]["to_cleanup_start_s"]
    goal = float(SETTINGS["poll_interval_seconds"]) + SLACK_S
    entry["goal_met"] = entry["goal_met"] and to_cleanup <= goal
    entry["details"]["note"] = "the goal is judged at the sensor's end and at cleanup's start"
    return entry


def tpu_idle(run: Run) -> dict[str, Any]:
    created, deleted = run.jobset_change("ADDED"), run.jobset_change("DELETED")
    running, ended = run.train_pod(("Running",)), run.train_pod(("Succeeded", "Failed"))
    cleanup_start = run.tasks["cleanup_kubernetes"][0]
    poll = float(SETTINGS["poll_interval_seconds"])
    return metric(
        (running - created) + (deleted - ended),
        (running - created) + (cleanup_start - ended),
        unit="s",
        goal=2 * poll,
        baseline_is="the backend deleted only at cleanup_kubernetes (same run's times)",
        details={
            "backend_created_to_training_running_s": round(running - created, 3),
            "training_end_to_backend_deleted_s": round(deleted - ended, 3),
            "baseline_training_end_to_cleanup_start_s": round(cleanup_start - ended, 3),
            "goal": f"two poll intervals ({2 * poll:g} s)",
        },
    )


def measure(tmp: Path) -> dict[str, dict[str, Any]]:
    """A successful run and a run whose training client dies, each in a fresh sandbox."""
    from airflow.utils import db

    db.resetdb()
    success = full_run(tmp / "success", Workloads())
    failure = full_run(tmp / "failure", Workloads(train_fail_at_step=FAIL_AT_STEP))
    for run, expected in ((success, "success"), (failure, "failed")):
        if run.result.state != expected:
            raise RuntimeError(f"a bench run ended {run.result.state}, not {expected}")
    return {
        "reward_detect_latency_s": reward_latency(success),
        "failure_detect_latency_s": failure_latency(failure),
        "tpu_idle_s": tpu_idle(success),
    }
