"""`make demo`: one whole tpu_rl_post_training run with the tutorial's settings, in the sandbox;
`make demo SCENARIO=<name>` trains with a fault the training health watchdog stops
(tools.demo_scenarios: nan, nan-export, stall, collapse); heldout_guard_fell is for `make
demo-ui`, where a person answers the approval it asks for.

Quiet and live: the terminal gets one line per task (when it starts, completed when it ends,
with its state and seconds) and a summary; Airflow's and the emulators' own output goes to a
log file whose path is printed first (`DEMO_LOG` chooses it; default `.airflow/demo.log`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from sandbox.airflow_env import AIRFLOW_ENV  # noqa: F401  (sets Airflow's environment before its import)
from sandbox.paths import REPO, TUTORIAL_CONF
from tools.demo_lines import (
    clock_line,
    evaluation_lines,
    export_line,
    gate_line,
    promoted_line,
    removed_line,
    rewards_line,
    watchdog_lines,
)
from tools.demo_scenarios import chosen
from tpu_rl.names import DAG_ID, Step

# The sandbox compresses time: poll every second, give up on pending pods after a minute.
SANDBOX_OVERRIDES = {"poll_interval_seconds": 1, "pending_timeout_minutes": 1}
TIME_SCALE = 0.001  # a sandbox second per 1000 of the run's (sandbox.harness.Sandbox.run)
FINISHED = {"success", "failed", "skipped", "upstream_failed", "removed"}
STARTED = {"running", "deferred", "up_for_retry", "up_for_reschedule"}
POLL_S = 0.25
REPORTS = REPO / ".airflow" / "reports"  # the run reports, kept after the sandbox is gone
# (corr of 64, mean_reward) the sandbox's trainer reports at its intermediate evaluations (every
# 10 steps): RL is not monotonic.
DEMO_EVALS = {10: (9, 0.0932), 20: (13, 0.1301), 30: (11, 0.1105), 40: (12, 0.1187)}


def redirect_output(log_path: Path) -> TextIO:
    """Send this process's stdout and stderr (fds 1 and 2) to the log; return the terminal."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    terminal = os.fdopen(os.dup(1), "w", buffering=1)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    return terminal


class Progress(threading.Thread):
    """Watches the run's task instances in the metadata DB and prints one line per task."""

    def __init__(self, out: TextIO, started_at: datetime) -> None:
        super().__init__(daemon=True)
        self.out = out
        self.started_at = started_at
        self.stopping = threading.Event()
        self.started: set[str] = set()
        self.ended: dict[str, str] = {}  # task -> its state, in the order the tasks ended
        self.open_line: str | None = None  # the task whose line waits for its end

    def run(self) -> None:
        while not self.stopping.wait(POLL_S):
            self.poll()

    def finish(self) -> None:
        self.stopping.set()
        self.join()
        self.poll()
        self._close_open_line()

    def poll(self) -> None:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session

        with create_session() as session:
            rows = (
                session.query(
                    TaskInstance.task_id,
                    TaskInstance.state,
                    TaskInstance.start_date,
                    TaskInstance.end_date,
                )
                .filter(TaskInstance.dag_id == DAG_ID)
                .order_by(TaskInstance.start_date)
                .all()
            )
        for task_id, state, start, end in rows:
            state = str(getattr(state, "value", state))
            if task_id in self.ended:
                continue
            if state in STARTED and start and task_id not in self.started:
                self._start(task_id, start)
            if state in FINISHED:
                self._end(task_id, state, start, end)

    def _at(self, when: datetime | None) -> float:
        return max(0.0, ((when or datetime.now(UTC)) - self.started_at).total_seconds())

    def _close_open_line(self) -> None:
        if self.open_line:
            self.out.write("\n")
            self.open_line = None

    def _start(self, task_id: str, start: datetime) -> None:
        self._close_open_line()
        self.started.add(task_id)
        self.out.write(f"{self._at(start):6.1f}s  {task_id:<20}")
        self.out.flush()
        self.open_line = task_id

    def _end(self, task_id: str, state: str, start: datetime | None, end: datetime | None) -> None:
        self.ended[task_id] = state
        seconds = (end - start).total_seconds() if start and end else 0.0
        verdict = f"{state:<16}{seconds:5.1f} s\n"
        if self.open_line == task_id:
            self.out.write(verdict)
            self.open_line = None
            return
        self._close_open_line()
        self.out.write(f"{self._at(start or end):6.1f}s  {task_id:<20}{verdict}")


def start_execution_api() -> float:
    """Seconds Airflow's in-process Execution API (dag.test's) takes to build its routes.

    It builds them on its first request; doing that before the run keeps those seconds out of
    the first task's time. A real deployment's API server does it once, at start.
    """
    import httpx
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    started = time.monotonic()
    with httpx.Client(transport=in_process_api_server().transport, base_url="http://api") as client:
        client.get("/health").raise_for_status()
    return time.monotonic() - started


def keep_report(gcs: Any, export: str, folder: Path) -> tuple[str, Path] | None:
    """Copy the run report outcome wrote next to the export into `folder` (the emulator's
    bucket goes with the sandbox); its summary and the copy's path, None when there is none."""
    bucket, _, prefix = export.removeprefix("gs://").partition("/")
    blobs = gcs.client().bucket(bucket)
    report = blobs.blob(prefix + "run-report.json")
    if not report.exists():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / "run-report.md"
    kept.write_text(blobs.blob(prefix + "run-report.md").download_as_text())
    return json.loads(report.download_as_text())["summary"], kept


def run_report_summary(result: Any) -> str:
    """Where the run report is kept (a file under .airflow/reports/) and its summary line."""
    export = result.xcoms.get("verify.return_value")
    if not export:
        return "none (no export)"
    folder = REPORTS / export.rstrip("/").rsplit("/", 1)[-1]
    kept = keep_report(result.gcs, export, folder)
    if kept is None:
        return "missing"
    return f"{kept[1]}\n          {kept[0]}"


def first_error(result: Any, ended: list[str]) -> str | None:
    """`task: reason` of the first task to fail: the first line of its error, which each failed
    task keeps as its XCom `failure` (tpu_rl.report.notify)."""
    for task in ended:
        if result.task_states.get(task) == "failed" and (
            reason := result.xcoms.get(f"{task}.failure")
        ):
            return f"{task}: {reason}"
    return None


def summary(
    result: Any, conf: dict[str, Any], took: float, report: str, ended: list[str]
) -> list[str]:
    """The demo's closing lines; `ended`: the tasks in the order they ended."""
    destroyed = [
        c["argv"][1] for c in result.calls if c["tool"] == "gcluster" and c["argv"][0] == "destroy"
    ]
    failed = [task for task, state in result.task_states.items() if state == "failed"]
    error = first_error(result, ended)
    anomaly = result.xcoms.get("wait_for_rewards.anomaly")
    if anomaly and error and error.startswith(f"{Step.WAIT_FOR_REWARDS}:"):
        error = None  # the watchdog's lines below say it whole
    return [
        f"{DAG_ID}: {result.state.upper()} in {took:.0f} s"
        + (f" (failed: {', '.join(failed)})" if failed else ""),
        *([f"error:    {error}"] if error else []),
        *watchdog_lines(anomaly),
        rewards_line(result.xcoms.get("wait_for_rewards.return_value") or {}),
        *evaluation_lines(
            result.xcoms.get("wait_for_rewards.return_value") or {},
            result.xcoms.get("gate.return_value"),
        ),
        "gate:     "
        + gate_line(
            result.task_states.get(Step.GATE),
            result.xcoms.get("gate.return_value"),
            float(conf.get("min_reward_gain", 0.0)),
        ),
        export_line(result),
        f"report:   {report}",
        clock_line(TIME_SCALE),
        f"promoted: {promoted_line(result.xcoms.get('promote.return_value'))}",
        "cleanup:  removed "
        + removed_line(result.xcoms.get("cleanup_kubernetes.return_value") or {})
        + f"; cluster destroyed: {', '.join(destroyed) or 'none'}",
        f"left in the sandbox: {', '.join(result.leftovers) or 'nothing'}",
    ]


def main() -> int:
    log_path = Path(os.environ.get("DEMO_LOG") or REPO / ".airflow" / "demo.log").resolve()
    try:
        scenario = chosen(os.environ.get("SCENARIO"))
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    terminal = redirect_output(log_path)
    terminal.write(f"{DAG_ID} on the local sandbox (emulated GKE, GCS, gcluster)\n")
    if scenario:
        terminal.write(f"scenario {os.environ['SCENARIO']}: {scenario.what}\n")
    terminal.write(f"full log (Airflow, emulators): {log_path}\n")
    from airflow.utils import db

    from sandbox.harness import Sandbox, Workloads
    from sandbox.workloads import EvalResult

    db.resetdb()
    conf = {**json.loads(TUTORIAL_CONF.read_text()), **SANDBOX_OVERRIDES}
    faults: dict[str, Any] = {}
    if scenario:
        conf.update(scenario.settings)
        faults = {"train_faults": scenario.faults, **scenario.workloads}
    api_seconds = start_execution_api()
    terminal.write(f"Airflow's in-process Execution API started in {api_seconds:.0f} s\n\n")
    started, started_at = time.monotonic(), datetime.now(UTC)
    progress = Progress(terminal, started_at)
    progress.start()
    with tempfile.TemporaryDirectory(prefix="tpu-rl-demo-") as tmp, Sandbox(Path(tmp)).up() as box:
        try:
            evals = {step: EvalResult(c, mean_reward=r) for step, (c, r) in DEMO_EVALS.items()}
            result = box.run(
                conf, Workloads(**{"train_evals": evals, **faults}), time_scale=TIME_SCALE
            )
        finally:
            progress.finish()
        report = run_report_summary(result)
    took = time.monotonic() - started
    lines = summary(result, conf, took, report, list(progress.ended))
    terminal.write("\n" + "\n".join(lines) + "\n")
    terminal.write(f"full log: {log_path}\n")
    terminal.flush()
    return 0 if result.state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
