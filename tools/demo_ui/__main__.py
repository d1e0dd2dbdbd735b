"""`make demo-ui`: Airflow's real processes and UI wired to the sandbox; Ctrl-C stops it all.
`make demo-ui SCENARIO=<name>`: every run trains with a fault the training health watchdog
stops (tools.demo_scenarios: nan, nan-export, stall, collapse), or, heldout_guard_fell, is held
for a person by the held-out evaluation's guard benchmark (under Required Actions).

A person triggers tpu_rl_post_training from the form, watches the grid and graph, reads the
task logs, and sees the RL post-training page and each run's report fill in. The deployment is
the process scenarios' (sandbox/processes/deployment.py) on SQLite: the sandbox (the Kubernetes API
and GCS emulators, the simulated pods, fake gcluster/terraform) runs in this process; the Airflow
processes reach it over loopback through sandbox/processes/site/sitecustomize.py.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import httpx

from sandbox.paths import REPO
from sandbox.processes.api import AirflowApi
from sandbox.processes.deployment import Deployment, running_deployment
from tools.demo import REPORTS, keep_report, redirect_output
from tools.demo_lines import clock_line, watchdog_lines
from tools.demo_scenarios import Scenario, chosen
from tools.demo_ui import PASSWORD
from tpu_rl.names import DAG_ID, Step

TERMINAL: list[TextIO] = [sys.stdout]  # where say() writes, whatever else prints


def say(text: object) -> None:
    print(text, file=TERMINAL[0], flush=True)


WATCH_S = 2.0  # how often the terminal asks Airflow about the runs
# Simulated time runs 100x faster (training's 50 steps of 60 s take about 30 s): slow enough to
# watch, and the reward trigger fires well after its task deferred. Fired within a scheduler
# loop or two, Airflow 3.3.2 can count the deferring process's exit as the resumed attempt's end
# and fail it (apache/airflow#72716); `make demo`'s dag.test() has no scheduler and runs 1000x.
TIME_SCALE = 0.01


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def report_link(gcs: Any, export: str) -> tuple[str, str]:
    """The run report's summary and where it is kept: a file under .airflow/reports/ (the GCS
    emulator's port dies with the demo)."""
    kept = keep_report(gcs, export, REPORTS / export.rstrip("/").rsplit("/", 1)[-1])
    return ("no report", "none") if kept is None else (kept[0], str(kept[1]))


class RunWatcher:
    """Prints each run of the DAG when it starts and when it ends (with rewards and report)."""

    def __init__(self, api: AirflowApi, gcs: Any) -> None:
        self.api, self.gcs = api, gcs
        self.seen: dict[str, str] = {}
        self.asked: set[str] = set()

    def get(self, path: str, **params: object) -> httpx.Response:
        return self.api.client.get(path, params=params)

    def poll(self) -> None:
        runs = self.get(f"/dags/{DAG_ID}/dagRuns", order_by="-run_after", limit=20)
        for run in reversed(runs.json().get("dag_runs", [])) if runs.status_code == 200 else []:
            run_id, state = run["dag_run_id"], run["state"]
            if state == "running" and run_id not in self.asked:
                self.awaiting_approval(run_id)
            if self.seen.get(run_id) == state:
                continue
            self.seen[run_id] = state
            if state in ("success", "failed"):
                self.ended(run_id, state)
            else:
                say(f"run {run_id}: {state}: {self.api.base_url}/dags/{DAG_ID}/runs/{run_id}")

    def awaiting_approval(self, run_id: str) -> None:
        """Says once where a run's approval waits (a run triggered with approval=required)."""
        done = self.get(f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{Step.APPROVE}")
        if done.status_code == 200 and done.json().get("state") == "awaiting_input":
            self.asked.add(run_id)
            page = f"{self.api.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/{Step.APPROVE}"
            say(f"run {run_id}: awaiting your approval: {page}/required_actions")

    def xcom(self, run_id: str, task_id: str, key: str = "return_value") -> Any:
        path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries"
        done = self.get(f"{path}/{key}", deserialize=True)
        return done.json().get("value") if done.status_code == 200 else None

    def failed_tasks(self, run_id: str) -> list[str]:
        """The run's failed tasks, the first to end first."""
        done = self.get(f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")
        tis = done.json().get("task_instances", []) if done.status_code == 200 else []
        failed = [ti for ti in tis if ti["state"] == "failed"]
        return [ti["task_id"] for ti in sorted(failed, key=lambda ti: ti.get("end_date") or "")]

    def first_error(self, run_id: str, failed: list[str]) -> str | None:
        """`task: reason` of the first failed task that kept its error's first line (the XCom
        `failure`, tpu_rl.report.notify)."""
        from tpu_rl.report.notify import FAILURE_XCOM_KEY

        for task_id in failed:
            path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries"
            done = self.get(f"{path}/{FAILURE_XCOM_KEY}", deserialize=True)
            if done.status_code == 200 and done.json().get("value"):
                return f"{task_id}: {done.json()['value']}"
        return None

    def ended(self, run_id: str, state: str) -> None:
        rewards = self.xcom(run_id, Step.WAIT_FOR_REWARDS) or {}
        pre, post = ((rewards.get(k) or {}).get("mean_reward") for k in ("pre", "post"))
        failed = self.failed_tasks(run_id)
        shown = f"mean_reward {pre} -> {post}" if post is not None else "no rewards"
        say(
            f"run {run_id}: {state.upper()}, {shown}"
            + (f"; failed: {', '.join(failed)}" if failed else "")
        )
        watchdog = watchdog_lines(self.xcom(run_id, Step.WAIT_FOR_REWARDS, "anomaly"))
        error = self.first_error(run_id, failed) if failed else None
        if error and not (watchdog and error.startswith(f"{Step.WAIT_FOR_REWARDS}:")):
            say(f"  error: {error}")  # the watchdog's lines say its own whole
        for line in watchdog:
            say(f"  {line}")
        export = self.xcom(run_id, Step.VERIFY)
        if export:
            summary, url = report_link(self.gcs, export)
            say(f"  run report: {url}\n  {summary}\n  {clock_line(TIME_SCALE)}")
        say(f"  RL post-training page: {self.api.base_url}/tpu-rl/")


def watch(d: Deployment, scenario: str | None = None) -> int:
    """Prints where to look, then each run's start and end, until Ctrl-C or a process dies."""
    if scenario:
        say(f"scenario {scenario}: {chosen(scenario).what}")
        say("  every run triggered here trains with it; the form holds its settings")
    say(f"Airflow UI: {d.url}/dags/{DAG_ID}")
    say(f"login: {d.username} / {d.password} (simple auth manager, demo only)")
    say(f"RL post-training page: {d.url}/tpu-rl/")
    say(f"logs: {d.log_dir}/ (processes and tasks), {d.log_dir.parent}/sandbox.log")
    say("Trigger the DAG from its page (the form holds the sandbox's settings).")
    say(
        "With approval=required (the form's Run control section) the run asks for your "
        "approval under Required Actions once its cluster is gone."
    )
    stored = janitor_defaults()
    say(
        "The janitor, tpu_rl_janitor, starts paused. Its stored defaults (the Variable "
        f"tpu_rl_janitor_params, set for this demo) are project {stored['project']}, region "
        f"{stored['region']}, dry run; give its form that project and region. Triggering it "
        "unpauses it: its 30-minute schedule then sweeps the sandbox with those defaults."
    )
    say("Ctrl-C stops Airflow and the sandbox.")
    watcher = RunWatcher(d.api(), d.sandbox.gcs)
    try:
        while not (dead := d.processes.dead()):
            with contextlib.suppress(httpx.HTTPError):  # a busy api-server: next time
                watcher.poll()
            sys.stdout.flush()
            time.sleep(WATCH_S)
    except KeyboardInterrupt:
        say("stopping Airflow and the sandbox")
        return 0
    say(f"{', '.join(dead)} exited: see {d.log_dir}")
    return 1


def janitor_defaults() -> dict[str, Any]:
    """What the demo stores as the janitor's defaults: the sandbox's, in dry run."""
    from sandbox.harness import SETTINGS

    return {
        "project": SETTINGS["project"],
        "region": SETTINGS["region"],
        "gcs_bucket": SETTINGS["gcs_bucket"],
        "dry_run": True,
    }


def janitor_in_the_sandbox() -> dict[str, str]:
    """The demo's environment for the janitor: its stored defaults are the sandbox's project,
    region and bucket in dry run, as the environment variable Airflow reads a Variable from in
    every process (AIRFLOW_VAR_<KEY>, looked up before the metadata DB: Airflow's docs,
    "Variables", "Storing Variables in Environment Variables"); and the DAGs are created paused.

    Paused, the janitor makes no run while Airflow starts: unpaused at creation, its schedule
    would run the latest 30-minute slot at once, the first task of a cold API server, which
    times out on a loaded machine. The demo unpauses tpu_rl_post_training once it is parsed;
    the janitor's form ("Unpause on trigger" is pre-checked) unpauses it, and its schedule then
    sweeps the sandbox with these defaults and succeeds."""
    from tpu_rl.operators.janitor import PARAMS_VARIABLE

    return {
        f"AIRFLOW_VAR_{PARAMS_VARIABLE.upper()}": json.dumps(janitor_defaults()),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    }


def serve(home: Path, port: int, name: str | None = None) -> int:
    """Airflow and the sandbox until Ctrl-C, its runs training with scenario `name`, if any."""
    from sandbox.harness import SETTINGS, Workloads, build_scenario

    scenario: Scenario | None = chosen(name)
    settings = {**SETTINGS, **scenario.settings} if scenario else SETTINGS
    faults = {"train_faults": scenario.faults, **scenario.workloads} if scenario else {}
    try:
        with running_deployment(
            home,
            janitor_in_the_sandbox(),
            port=port,
            password=PASSWORD,
            sqlite=True,
            time_scale=TIME_SCALE,
            form_defaults=settings,
        ) as d:
            d.api().client.patch(f"/dags/{DAG_ID}", json={"is_paused": False}).raise_for_status()
            box = d.sandbox
            box.use(build_scenario(settings, box.gcs, Workloads(**faults), box.emu))
            return watch(d, name)
    except KeyboardInterrupt:  # while starting
        say("stopping Airflow and the sandbox")
        return 0


def main() -> int:
    port = int(os.environ.get("DEMO_UI_PORT") or 8080)
    scenario = os.environ.get("SCENARIO") or None
    try:
        chosen(scenario)
    except ValueError as err:
        say(err)
        return 2
    home = Path(os.environ.get("DEMO_UI_HOME") or REPO / ".airflow" / "demo-ui").resolve()
    if not port_is_free(port):
        say(f"port {port} is in use: stop what uses it, or make demo-ui PORT=<port>")
        return 2
    shutil.rmtree(home, ignore_errors=True)  # each demo starts from an empty database
    home.mkdir(parents=True)
    # Ctrl-C stops it even when started from a shell's background job, which ignores SIGINT (a
    # process inherits that, and Python then installs no KeyboardInterrupt handler); SIGTERM too
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # SIGUSR1 writes every thread's stack to stderr (sandbox.log): where a stuck demo is
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    say(f"starting Airflow on the local sandbox in {home} (about a minute)")
    # the terminal gets this module's lines; the sandbox's and Airflow's own output a file
    TERMINAL[0] = redirect_output(home / "sandbox.log")
    try:
        return serve(home, port, scenario)
    except (RuntimeError, TimeoutError) as err:
        say(err)
        return 1
    finally:
        say("stopped")


if __name__ == "__main__":
    sys.exit(main())
