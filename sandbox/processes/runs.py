"""One DAG run in the process harness: its pods' scripts, how to wait for it to settle, and the
report entry (`make e2e REPORT=<file>`) that says whether it ended clean."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.controller import Rule
from sandbox.harness import SETTINGS, Workloads, build_scenario
from sandbox.pod_scripts import PodInfo, PodScript, ScriptSource, Step, call, exit, log, sleep
from sandbox.processes.api import LOADED_WAIT_S, AirflowApi
from sandbox.processes.deployment import Deployment
from sandbox.run_errors import error_lines
from sandbox.training_curve import NO_FAULTS, TrainingFaults
from sandbox.workloads import EvalResult, absl
from tpu_rl.layout import run_slug

UNFINISHED = {"queued", "scheduled", "running", "deferred", "up_for_retry", "restarting"}
TIME_SCALE = 0.001  # the controller's: simulated seconds -> wall seconds
HOLD_TICK_S = 0.5  # a held pod looks this often whether it is released
BURST = 20  # reward lines a burst logs at once
BURST_AFTER_S = 0.2
# Every process scenario's limits, in simulated minutes (20000 are 20 wall minutes here): the
# shipped ones (training 12 h: 47 wall s with its pending wait) ran out under CI's load while a
# scenario held training, restarted a process or ran another deployment's run beside it. A
# scenario still ends each hold itself, long before.
LOADED_LIMITS = {
    "training_timeout_minutes": 20000,
    "export_timeout_minutes": 600,
}
# The process scenarios' deployer setting: a dagrun_timeout that LOADED_LIMITS' worst case fits
# (validate's budget check, tpu_rl.dag.run_limits.budget_problem: about 22,400 minutes).
DEPLOYER_ENV = {"TPU_RL_DAGRUN_TIMEOUT_MINUTES": str(30 * 24 * 60)}
# A training hold (wall seconds) that the scenario ends itself (Run.training_released) once it has
# seen what it waits for: a hold timed to end on its own ran out first on a loaded machine.
UNTIL_RELEASED_S = 600.0


@dataclass
class Run:
    """A run a scenario triggered, and the events its pods signal."""

    name: str
    run_id: str
    settings: dict[str, Any]
    deployment: Deployment
    training_held: threading.Event = field(default_factory=threading.Event)
    training_released: threading.Event = field(default_factory=threading.Event)
    convert_held: threading.Event = field(default_factory=threading.Event)
    burst_due: threading.Event = field(default_factory=threading.Event)
    burst_logged: threading.Event = field(default_factory=threading.Event)

    @property
    def label(self) -> str:
        """Its value of the run label on every object it creates."""
        return run_slug(self.run_id, self.deployment.identity())


def settings_for(name: str, **overrides: Any) -> dict[str, Any]:
    """The sandbox settings with LOADED_LIMITS and a bucket and a cluster of the scenario's own
    (names <= 20)."""
    slug = name.replace("_", "-")[:18]
    return {
        **SETTINGS,
        **LOADED_LIMITS,
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
    burst_lines: int = 0,
    train_faults: TrainingFaults = NO_FAULTS,
    **settings: Any,
) -> Run:
    """Pods' scripts for this run, then trigger it as the UI does. Training is held after
    its first Intermediate line for `hold_training_s` wall seconds or until
    `training_released` (with `burst_lines`: first until `burst_due`, then that many lines
    logged at once); the conversion held `hold_convert_s` before it writes; the training's
    pods admitted `admit_training_after_s` after its Job is created; `train_faults`: the
    training's faults (sandbox.training_curve: a NaN, a stall...)."""
    run = Run(name, f"proc__{name}", settings_for(name, **settings), d)
    admit_after = admit_training_after_s / TIME_SCALE
    workloads = Workloads(admit_after=admit_after, train_faults=train_faults)
    # with the emulator: pods read and write GCS as their own Google identity (strict sandbox)
    scenario = build_scenario(run.settings, d.sandbox.gcs, workloads, d.sandbox.emu)
    if hold_training_s:
        trains = next(r.script for r in scenario.rules if r.job == "-train")
        train = _held_training(run, trains, hold_training_s, burst_lines)
        scenario.rules.insert(0, Rule(train, "-train", admit_after=workloads.admit_after))
    if hold_convert_s:
        held = [call(lambda _i: run.convert_held.set()), sleep(hold_convert_s / TIME_SCALE)]
        scenario.rules.insert(0, Rule(PodScript([*held, exit(0)]), "-convert", index=0))
    d.sandbox.use(scenario)
    api.trigger(run.settings, run.run_id)
    return run


@dataclass(frozen=True)
class Tick:
    """A pod step the sandbox's kubelet runs as a sleep (it reads `action` and `seconds` as
    the step starts, sandbox/controller.py Controller._advance): HOLD_TICK_S, or no time
    once `released` is set, so a hold of ticks ends early when the test says so."""

    released: threading.Event
    action: str = "sleep"

    @property
    def seconds(self) -> float:
        return 0.0 if self.released.is_set() else HOLD_TICK_S / TIME_SCALE


def burst_reward(index: int) -> float:
    """The mean_reward of the burst's line `index` (0, 1, ...): what tells its lines apart."""
    return round(0.5 + index / 1e4, 4)


def burst_marker(index: int) -> str:
    """What the reward wait logs of the burst's line `index` (it logs the float's repr)."""
    return f"mean_reward={burst_reward(index)} "


def burst(count: int) -> list[Step]:
    """A reward line, then BURST_AFTER_S later `count` more at once: the reward wait polls on
    the first at once and on the others only after its minimum gap between polls
    (tpu_rl.rewards.trigger.MIN_POLL_GAP_S), so a stop right after the burst falls between
    the logging of its lines (as they arrive) and the poll that saves the position."""
    fields = [EvalResult(8, mean_reward=burst_reward(i)).fields() for i in range(count + 1)]
    lines = [log(absl("W", f"Intermediate Eval (step=10): {f}")) for f in fields]
    return [lines[0], sleep(BURST_AFTER_S / TIME_SCALE), *lines[1:]]


def ticks(released: threading.Event, hold_s: float) -> list[Tick]:
    """A hold of `hold_s` wall seconds that ends when `released` is set."""
    return [Tick(released)] * int(hold_s / HOLD_TICK_S)


def _held_training(run: Run, trains: ScriptSource, hold_s: float, burst_lines: int):
    """The sandbox's training script, held after its first Intermediate line (see start_run)."""

    def script(info: PodInfo) -> PodScript:
        base = trains(info) if callable(trains) else trains
        steps = list(base.steps)
        first_eval = next(
            i
            for i, s in enumerate(steps)
            if s.action == "log" and callable(s.text) and "Intermediate" in s.text()
        )
        hold = [call(lambda _i: run.training_held.set())]
        if burst_lines:  # when the test says, then held again
            logged = call(lambda _i: run.burst_logged.set())
            hold += [*ticks(run.burst_due, hold_s), *burst(burst_lines), logged]
        hold += ticks(run.training_released, hold_s)
        steps[first_eval + 1 : first_eval + 1] = hold
        return PodScript(steps, base.container)

    return script


def wait_for_event(api: AirflowApi, run: Run, event: threading.Event, what: str) -> None:
    """Wait for a pod's signal, failing at once if the run ended before it."""
    api.wait(
        what,
        lambda: event.is_set() or _ended_early(api, run, what),
        timeout_s=LOADED_WAIT_S,
    )


def _ended_early(api: AirflowApi, run: Run, what: str) -> bool:
    state = api.run(run.run_id)["state"]
    if state in ("success", "failed"):
        raise AssertionError(f"run {state} before {what}: {api.task_states(run.run_id)}")
    return False


def settle(
    api: AirflowApi, run: Run, timeout_s: float = LOADED_WAIT_S
) -> tuple[str, dict[str, str | None]]:
    """Wait until the run ended and none of its tasks is still going; its state and tasks'."""

    def settled() -> tuple[str, dict[str, str | None]] | None:
        state = api.run(run.run_id)["state"]
        tasks = api.task_states(run.run_id)
        if state in ("success", "failed") and not UNFINISHED & set(tasks.values()):
            return state, tasks
        return None

    return api.wait(f"run {run.run_id} to settle", settled, timeout_s)


def task_log(d: Deployment, run: Run, task_id: str) -> str:
    """Every log file of the task, the triggerer's included."""
    return "".join(
        text
        for path, text in d.logs().items()
        if f"run_id={run.run_id}" in str(path) and f"task_id={task_id}" in str(path)
    )


def token_leaks(d: Deployment) -> list[str]:
    """Process logs, task logs and DB tables that contain its Hugging Face token."""
    places = [str(p) for p, text in d.logs().items() if d.hf_token in text]
    if d.hf_token in d.postgres.dump():
        places.append("postgres")
    return places


def report_entry(
    d: Deployment, run: Run, state: str, expected: str, tasks: dict[str, Any]
) -> dict[str, Any]:
    """The fields of the in-process report, plus `harness` and the tasks' states."""
    cluster = run.settings["cluster_name"]
    created = run.settings.get("cluster_mode", "create") == "create"  # an existing one stays
    left = d.sandbox.leftovers(run.label) + [
        f"cluster/{name}" for name in d.sandbox.clusters() if created and name == cluster
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


def finish(d: Deployment, run: Run, expected: str, e2e_report: list) -> dict:
    """Settle the run, report it (`make e2e`), assert state, nothing left and no token."""
    try:
        state, tasks = settle(d.api(), run)
    except AssertionError as timed_out:
        api = d.api()
        e2e_report.append(report_entry(d, run, api.run(run.run_id)["state"], expected, {}))
        going = {t: s for t, s in api.task_states(run.run_id).items() if s in UNFINISHED}
        raise AssertionError(f"{timed_out}; tasks still going: {going}; logs {d.log_dir}") from None
    entry = report_entry(d, run, state, expected, tasks)
    e2e_report.append(entry)
    unusual = {t: s for t, s in tasks.items() if s not in ("success", "skipped")}
    assert state == expected, (
        f"run {state}; tasks not success/skipped: {unusual}; logs {d.log_dir}\n"
        + task_errors(d.log_dir, run.run_id, unusual)
    )
    cleanups = {t: s for t, s in tasks.items() if t.startswith("cleanup")}
    assert entry["cleanup_complete"], f"left {entry['leftover_objects']}; {cleanups}"
    assert entry["token_leaks"] == []
    return tasks


def task_errors(log_dir: Path, run_id: str, task_ids: Any) -> str:
    """The error lines of these tasks' logs in this run (Airflow's task logs under `log_dir`):
    why they failed, in the message."""
    found = []
    for task_id in task_ids:
        for path in sorted(log_dir.rglob(f"run_id={run_id}/task_id={task_id}/*.log")):
            lines = error_lines(path.read_text(errors="replace"), last=4)
            found += [f"{task_id}: {line}" for line in lines]
    return "\n".join(found)
