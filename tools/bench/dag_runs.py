"""Whole DAG runs in the sandbox, as production runs them: polls of POLL_S (>= 10 s) everywhere.

Two runs, each in a fresh sandbox, through Airflow's own `dag.test()` (a worker runs each task
with `run_task_in_process`; a deferred task's trigger runs in line, holding no worker):
- success: TPU capacity and Kueue admission arrive late (tens of simulated minutes) for the
  conversion, the backend's TPU workers, the training Job and the export;
- failure: the training client dies at step FAIL_AT_STEP.

Worker slots: every `run_task_in_process` call is timed per task (what a worker slot holds);
the trigger phases in between are timed apart. Baseline: the same run with each wait held in
the worker (what a blocking wait, deferrable=False or a sleeping loop, holds at the least).

Detection, baseline: the provider's own `GKEJobTrigger` (what the deferrable
`GKEStartJobOperator(wait_until_job_complete=True)` defers on), with its default
`job_poll_interval`, on a twin of the run's training Job created the moment it is (same script,
same admission delay; labelled apart, so the run's cleanup leaves it to be watched to its end).
PHASES copies start a fraction of a poll apart, so the figure is the mean over where its ticks
fall, not one lucky phase.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

from sandbox.controller import Controller
from sandbox.harness import SETTINGS, Sandbox, Workloads, build_scenario
from sandbox.run_errors import recording_trigger_events
from tools.bench.metric import metric
from tools.bench.observe import Change, ChangeClock
from tools.bench.provider_wait import PHASES, PROVIDER_POLL_S, ProviderWait
from tpu_rl.names import DAG_ID, Step

POLL_S = max(10, int(PROVIDER_POLL_S))  # the same on both sides, at least 10 s
# 3110 simulated seconds of training: about 12 s; a failure at step 40 about 10 s after the
# training Job is created, after the last provider phase has started polling
TIME_SCALE = 0.004
FAIL_AT_STEP = 40
# simulated seconds before the pods may start: TPU capacity (conversion, backend workers,
# export) and Kueue admission (training), tens of minutes each
LATE = {"-convert": 1200, "-worker": 1500, "-train": 1200, "-export": 1200}
# GKE's controllers run on Google's side; the sandbox's share the timed worker's process and
# its GIL. At a 10 ms tick they took a third of a core; every 50 ms (12.5 simulated
# seconds at TIME_SCALE, under a training step) they take a tenth.
CONTROLLER_TICK_S = 0.05
WAITING_TASKS = (Step.CONVERT, Step.START_BACKEND, Step.TRAIN, Step.WAIT_FOR_REWARDS, Step.EXPORT)
REWARD_GOAL_S = 2.0
FAILURE_GOAL_S = 3.0
SLOT_GOAL_S = 2.0


@dataclass
class Timings:
    """What dag.test's worker and in-line triggerer did, per task: (start, end) epoch seconds."""

    worker: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    trigger: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))

    def held(self, task_id: str) -> float:
        return sum(end - start for start, end in self.worker.get(task_id, []))

    def waited(self, task_id: str) -> float:
        return sum(end - start for start, end in self.trigger.get(task_id, []))


@contextmanager
def timed_dag_test() -> Iterator[Timings]:
    """Time dag.test's two seams: the worker (run_task_in_process) and the in-line trigger."""
    from airflow.sdk.definitions import dag as dag_module
    from airflow.sdk.execution_time import supervisor

    timings = Timings()
    run_task, run_trigger = supervisor.run_task_in_process, dag_module._run_inline_trigger

    def worker(*, ti: Any, task: Any) -> Any:
        start = time.time()
        try:
            return run_task(ti=ti, task=task)
        finally:
            timings.worker[ti.task_id].append((start, time.time()))

    def trigger(trigger_: Any, ti: Any) -> Any:
        start = time.time()
        try:
            return run_trigger(trigger_, ti)
        finally:
            timings.trigger[ti.task_id].append((start, time.time()))

    with (
        mock.patch.object(supervisor, "run_task_in_process", worker),
        mock.patch.object(dag_module, "_run_inline_trigger", trigger),
    ):
        yield timings


@dataclass
class Run:
    """One finished DAG run: its result, the emulator's change times, the worker timings."""

    result: Any
    clock: ChangeClock
    timings: Timings
    provider: ProviderWait
    tasks: dict[str, tuple[float, float]]  # task_id -> (start, end) from Airflow's DB

    def job_change(self, when: Any, job: str | None = None) -> float:
        job = job or self.result.xcoms["train.job_name"]
        return self.clock.first("jobs", lambda c: c.name == job and when(c))

    def twin_post_line_at(self) -> float:
        """When the twin's pod logged its Post line (the emulator's record time)."""
        (pod,) = self.result.emu.list("pods", label_selector=f"job-name={self.provider.twin}")
        meta = pod["metadata"]
        _, container_log = self.result.emu.read_log(meta["namespace"], meta["name"], None)
        post = next(r for r in container_log.records if "Post RL Training:" in r.text)
        return post.at.timestamp()

    def provider_mean(self, event_at: float) -> tuple[float, list[float]]:
        after = [at - event_at for at, _ in self.provider.fired]
        if len(after) != PHASES or max(self.provider.started_at) > event_at:
            raise RuntimeError(
                f"GKEJobTrigger fired {len(after)} times of {PHASES}, or started polling after "
                "the event: make the run longer (TIME_SCALE)"
            )
        return statistics.mean(after), [round(a, 3) for a in sorted(after)]


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


def full_run(tmp: Path, workloads: Workloads, late: dict[str, float]) -> Run:
    from sandbox.dagbags import DagBag

    tmp.mkdir()
    conf = {**SETTINGS, "poll_interval_seconds": POLL_S, "pending_timeout_minutes": 10}
    events: list[dict[str, Any]] = []  # each deferred wait's event: why() says why a run failed
    with Sandbox(tmp).up() as box, ChangeClock(box.emu) as clock:
        dag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).dags[DAG_ID]
        scenario = build_scenario(conf, box.gcs, workloads)
        for job, simulated_s in late.items():
            scenario.on(job, admit_after=simulated_s)  # after the script rules: delay only
        with (
            Controller(box.emu, scenario, time_scale=TIME_SCALE, tick_s=CONTROLLER_TICK_S),
            ProviderWait(box.emu) as provider,
            timed_dag_test() as timings,
            recording_trigger_events(events),
        ):
            dag_run = dag.test(run_conf=conf)
        result = box.result(dag_run, events)
    return Run(result, clock, timings, provider, task_dates(result.run_id))


def epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def is_done(change: Change) -> bool:
    return change.has_condition("Complete") or change.has_condition("Failed")


def reward_latency(run: Run) -> dict[str, Any]:
    post_at = epoch(run.result.xcoms["wait_for_rewards.return_value"]["post_time"])
    wait_end = run.timings.trigger[Step.WAIT_FOR_REWARDS][-1][1]
    baseline, each = run.provider_mean(run.twin_post_line_at())
    return metric(
        wait_end - post_at,
        baseline,
        unit="s",
        goal=REWARD_GOAL_S,
        baseline_is=(
            f"GKEJobTrigger (deferrable GKEStartJobOperator, job_poll_interval "
            f"{PROVIDER_POLL_S:g} s) on the same Job: mean over {PHASES} poll phases"
        ),
        details={
            "from": "the Post line's log timestamp",
            "to": "the trigger's event (the wait's end in the triggerer)",
            "poll_interval_s": {"ours": POLL_S, "provider": PROVIDER_POLL_S},
            "to_sensor_task_end_s": round(run.tasks[Step.WAIT_FOR_REWARDS][1] - post_at, 3),
            "job_done_after_post_s": round(run.job_change(is_done) - post_at, 3),
            "baseline_each_phase_s": each,
        },
    )


def failure_latency(run: Run) -> dict[str, Any]:
    failed_at = run.job_change(lambda c: c.has_condition("Failed"))
    cleanup_start = run.tasks[Step.CLEANUP_KUBERNETES][0]
    wait_end = run.timings.trigger[Step.WAIT_FOR_REWARDS][-1][1]
    scheduling = cleanup_start - wait_end  # the wait's end to cleanup's start: same either way
    twin_failed_at = run.job_change(lambda c: c.has_condition("Failed"), run.provider.twin)
    provider, each = run.provider_mean(twin_failed_at)
    return metric(
        cleanup_start - failed_at,
        provider + scheduling,
        unit="s",
        goal=FAILURE_GOAL_S,
        baseline_is=(
            f"GKEJobTrigger (job_poll_interval {PROVIDER_POLL_S:g} s) on the same Job, mean over "
            f"{PHASES} poll phases, plus this run's wait-end-to-cleanup scheduling time"
        ),
        details={
            "from": "the training Job's Failed condition",
            "to": "cleanup_kubernetes's start",
            "poll_interval_s": {"ours": POLL_S, "provider": PROVIDER_POLL_S},
            "to_wait_end_s": round(wait_end - failed_at, 3),
            "wait_end_to_cleanup_start_s": round(scheduling, 3),
            "baseline_detection_each_phase_s": each,
            "provider_statuses": sorted({status for _, status in run.provider.fired}),
        },
    )


def worker_slots(run: Run) -> dict[str, Any]:
    t = run.timings
    per_task = {
        task: {
            "held_s": round(t.held(task), 3),
            "in_triggerer_s": round(t.waited(task), 3),
            "worker_calls": len(t.worker.get(task, [])),
            "baseline_held_s": round(t.held(task) + t.waited(task), 3),
        }
        for task in WAITING_TASKS
    }
    worst = max(WAITING_TASKS, key=t.held)
    worst_baseline = max(WAITING_TASKS, key=lambda task: t.held(task) + t.waited(task))
    return metric(
        t.held(worst),
        t.held(worst_baseline) + t.waited(worst_baseline),
        unit="s",
        goal=SLOT_GOAL_S,
        baseline_is=(
            "the same run with every wait held in the worker slot (a blocking wait holds "
            "at least this): the longest of the waiting tasks"
        ),
        details={
            "value_is": f"the longest a waiting task held a worker slot ({worst})",
            "per_task": per_task,
            "late_simulated_s": LATE,
            "time_scale": TIME_SCALE,
            "late_wall_s": {job: round(s * TIME_SCALE, 2) for job, s in LATE.items()},
        },
    )


def measure(tmp: Path) -> dict[str, dict[str, Any]]:
    """A successful run with late capacity and a run whose training client dies."""
    from airflow.utils import db

    db.resetdb()
    success = full_run(tmp / "success", Workloads(), LATE)
    failure = full_run(tmp / "failure", Workloads(train_fail_at_step=FAIL_AT_STEP), {})
    for run, expected in ((success, "success"), (failure, "failed")):
        if run.result.state != expected:
            raise RuntimeError(
                f"a bench run ended {run.result.state}, not {expected}: {run.result.why()}"
            )
    return {
        "reward_detect_latency_s": reward_latency(success),
        "failure_detect_latency_s": failure_latency(failure),
        "worker_slot_seconds": worker_slots(success),
    }
