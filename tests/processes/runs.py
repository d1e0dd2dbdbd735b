"""One DAG run in the process harness: its pods' scripts, how to wait for it to settle, and the
report entry (`make e2e REPORT=<file>`) that says whether it ended clean."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tests.processes.api import AirflowApi
from tests.processes.deployment import DEPLOYMENT_ID, Deployment
from tests.sandbox.controller import PodInfo, PodScript, Rule, ScriptSource, call, exit, sleep
from tests.sandbox.harness import HF_TOKEN, SETTINGS, Workloads, build_scenario
from tpu_rl.layout import run_slug

UNFINISHED = {"queued", "scheduled", "running", "deferred", "up_for_retry", "restarting"}
TIME_SCALE = 0.001  # the controller's: simulated seconds -> wall seconds


@dataclass
class Run:
    """A run a scenario triggered, and the events its pods signal."""

    name: str
    run_id: str
    settings: dict[str, Any]
    training_held: threading.Event = field(default_factory=threading.Event)
    convert_held: threading.Event = field(default_factory=threading.Event)

    @property
    def label(self) -> str:
        return run_slug(self.run_id, DEPLOYMENT_ID)  # the harness's TPU_RL_DEPLOYMENT_ID


def settings_for(name: str, **overrides: Any) -> dict[str, Any]:
    """The sandbox settings with a bucket and a cluster of the scenario's own (names <= 20)."""
    slug = name.replace("_", "-")[:18]
    return {
        **SETTINGS,
        "cluster_name": f"p-{slug}",
        "gcs_bucket": f"tpu-rl-proc-{slug}",
        **overrides,
    }


def start_run(
    d: Deployment,
    api: AirflowApi,
    name: str,
    hold_training_s: float = 0,
    hold_convert_s: float = 0,
    admit_training_after_s: float = 0,
    **settings: Any,
) -> Run:
    """Pods' scripts for this run (training held `hold_training_s` wall seconds after its first
    Intermediate line, the conversion `hold_convert_s` before it writes, the training's pods
    admitted `admit_training_after_s` after its Job is created, if asked), then trigger it as
    the UI does."""
    run = Run(name, f"proc__{name}", settings_for(name, **settings))
    workloads = Workloads(admit_after=admit_training_after_s / TIME_SCALE)
    # with the emulator: pods read and write GCS as their own Google identity (strict sandbox)
    scenario = build_scenario(run.settings, d.sandbox.gcs, workloads, d.sandbox.emu)
    if hold_training_s:
        trains = next(r.script for r in scenario.rules if r.job == "-train")
        train = _held_training(run, trains, hold_training_s)
        scenario.rules.insert(0, Rule(train, "-train", admit_after=workloads.admit_after))
    if hold_convert_s:
        held = [call(lambda _i: run.convert_held.set()), sleep(hold_convert_s / TIME_SCALE)]
        scenario.rules.insert(0, Rule(PodScript([*held, exit(0)]), "-convert", index=0))
    d.sandbox.use(scenario)
    api.trigger(run.settings, run.run_id)
    return run


def _held_training(run: Run, trains: ScriptSource, hold_s: float):
    """The sandbox's training script, held `hold_s` wall seconds after its first Intermediate
    line."""

    def script(info: PodInfo) -> PodScript:
        base = trains(info) if callable(trains) else trains
        steps = list(base.steps)
        first_eval = next(
            i
            for i, s in enumerate(steps)
            if s.action == "log" and callable(s.text) and "Intermediate" in s.text()
        )
        hold = [call(lambda _i: run.training_held.set()), sleep(hold_s / TIME_SCALE)]
        steps[first_eval + 1 : first_eval + 1] = hold
        return PodScript(steps, base.container)

    return script


def wait_for_event(api: AirflowApi, run: Run, event: threading.Event, what: str) -> None:
    """Wait for a pod's signal, failing at once if the run ended before it."""
    api.wait(
        what,
        lambda: event.is_set() or _ended_early(api, run, what),
        timeout_s=150,
    )


def _ended_early(api: AirflowApi, run: Run, what: str) -> bool:
    state = api.run(run.run_id)["state"]
    if state in ("success", "failed"):
        raise AssertionError(f"run {state} before {what}: {api.task_states(run.run_id)}")
    return False


def settle(api: AirflowApi, run: Run, timeout_s: float = 180) -> tuple[str, dict[str, str | None]]:
    """Wait until the run ended and none of its tasks is still going; its state and tasks'."""

    def settled() -> tuple[str, dict[str, str | None]] | None:
        state = api.run(run.run_id)["state"]
        tasks = api.task_states(run.run_id)
        if state in ("success", "failed") and not UNFINISHED & set(tasks.values()):
            return state, tasks
        return None

    return api.wait(f"run {run.run_id} to settle", settled, timeout_s)


def token_leaks(d: Deployment) -> list[str]:
    """Process logs, task logs and DB tables that contain the Hugging Face token."""
    places = [str(p) for p, text in d.logs().items() if HF_TOKEN in text]
    if HF_TOKEN in d.postgres.dump():
        places.append("postgres")
    return places


def report_entry(
    d: Deployment, run: Run, state: str, expected: str, tasks: dict[str, Any]
) -> dict[str, Any]:
    """The fields of the in-process report, plus `harness` and the tasks' states."""
    cluster = run.settings["cluster_name"]
    left = d.sandbox.leftovers(run.label) + [
        f"cluster/{name}" for name in d.sandbox.clusters() if name == cluster
    ]
    leaks = token_leaks(d)
    return {
        "name": run.name,
        "harness": "processes",
        "dag_run_state": state,
        "expected_state": expected,
        "cleanup_complete": not left,
        "leftover_objects": left,
        "token_leaks": leaks,
        "passed": state == expected and not left and not leaks,
    }
