"""Faults only real Airflow processes show: each scenario ends a run some way and asserts its
final state, that nothing of it is left (Jobs, JobSets, Secrets, pods, cluster) and that the token
is in no process log, task log or DB table.

One deployment serves every scenario (start-up is the main cost); each run has its own bucket and
cluster name, and `max_active_runs=1` is respected by settling a run before the next starts. The
scenario that changes the deployment's settings (dagrun_timeout) runs last.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from sandbox.processes.api import LOADED_WAIT_S
from sandbox.processes.deployment import Deployment
from sandbox.processes.runs import (
    BURST,
    UNTIL_RELEASED_S,
    Run,
    burst_marker,
    finish,
    start_run,
    task_log,
    wait_for_event,
)

WAIT = "wait_for_rewards"
# These run on one xdist worker (make test: --dist loadgroup), in file order, after the two
# deployments' scenario, on its deployment. The other process group (processes-2: package
# layouts, approval) runs beside them, on a worker and a deployment of its own.
pytestmark = pytest.mark.xdist_group("processes")


def cleanups_ran(tasks: dict) -> None:
    assert tasks["cleanup_kubernetes"] == "success", tasks
    assert tasks["cleanup_cluster"] == "success", tasks


def new_deploy(d: Deployment, before: list[int]) -> int:
    """Wait for a `gcluster deploy` not among `before`; its pid."""
    return d.api().wait(
        "gcluster deploy to start",
        lambda: next((p for p in d.sandbox.deploy_pids() if p not in before), None),
        timeout_s=LOADED_WAIT_S,
    )


def gone(pid: int, within_s: float = 15) -> bool:
    """Whether the process ends (or is a zombie) within the time."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


@pytest.mark.defers
def test_marked_failed_while_reward_wait_deferred(deployment: Deployment, e2e_report) -> None:
    api = deployment.api()
    run = start_run(deployment, api, "deferred_marked_failed", hold_training_s=UNTIL_RELEASED_S)
    wait_for_event(api, run, run.training_held, "training's first evaluation")
    api.wait_task(run.run_id, "wait_for_rewards", {"deferred"})
    api.mark_run(run.run_id, "failed")
    cleanups_ran(finish(deployment, run, "failed", e2e_report))


def test_marked_failed_while_convert_runs(deployment: Deployment, e2e_report) -> None:
    api = deployment.api()
    run = start_run(deployment, api, "convert_marked_failed", hold_convert_s=60)
    wait_for_event(api, run, run.convert_held, "the conversion pod")
    api.wait_task(run.run_id, "convert", {"running", "deferred"})
    api.mark_run(run.run_id, "failed")
    cleanups_ran(finish(deployment, run, "failed", e2e_report))


def test_marked_failed_while_gcluster_deploys(deployment: Deployment, e2e_report) -> None:
    api, box = deployment.api(), deployment.sandbox
    box.hold_deploy(60)
    try:
        before = box.deploy_pids()
        run = start_run(deployment, api, "deploy_marked_failed")
        pid = new_deploy(deployment, before)
        api.mark_run(run.run_id, "failed")
        assert gone(pid), "gcluster deploy went on after its run was marked failed"
    finally:
        box.hold_deploy(0)
    tasks = finish(deployment, run, "failed", e2e_report)
    assert tasks["cleanup_cluster"] == "success", tasks  # the half-deployed cluster


def test_workers_killed_then_export_cleared(deployment: Deployment, e2e_report) -> None:
    """Three faults that each end in success, in one run (a whole run is the costly part):
    create_cluster's task process dies with SIGKILL, and its gcluster must not deploy on beside
    the retry's; then train's, while it talks to GKE, and its retry submits one Job; then, the
    run finished, its export is cleared as the UI does: it exports again, no retraining, no
    leak."""
    api, box = deployment.api(), deployment.sandbox
    run_id = "proc__workers_killed"
    train_held = box.hold_task(run_id, "train", seconds=60)
    box.hold_deploy(60)
    try:
        before = box.deploy_pids()
        run = start_run(deployment, api, "workers_killed", hold_training_s=5)
        pid = new_deploy(deployment, before)
        task_pid = api.task_instances(run_id)["create_cluster"]["pid"]
        assert task_pid in [p.pid for p in psutil.Process(pid).parents()], "not its task's gcluster"
        os.kill(task_pid, signal.SIGKILL)
        box.hold_deploy(0)  # the retry deploys at once
        retry = new_deploy(deployment, [*before, pid])
        assert gone(pid, 2), (
            f"the killed task's gcluster ({pid}) still runs beside the retry's ({retry})"
        )
    finally:
        box.hold_deploy(0)
    train_pid = int(
        api.wait(
            "train's process to be held",
            lambda: train_held.exists() and train_held.read_text(),
            LOADED_WAIT_S,
        )
    )
    assert api.task_instances(run_id)["train"]["pid"] == train_pid, "not train's process"
    os.kill(train_pid, signal.SIGKILL)
    tasks = finish(deployment, run, "success", e2e_report)
    tries = {t: ti["try_number"] for t, ti in api.task_instances(run_id).items()}
    assert (tries["create_cluster"], tries["train"]) == (2, 2), tasks
    export_cleared_and_rerun(deployment, run, tries, e2e_report)


def export_cleared_and_rerun(d: Deployment, run: Run, tries: dict, e2e_report: list) -> None:
    """Clear the finished run's export as the UI does: only it runs again, and ends clean."""
    api = d.api()
    api.clear_task(run.run_id, "export")
    api.wait(
        "the run to start again", lambda: api.run(run.run_id)["state"] != "success", LOADED_WAIT_S
    )
    run.name = f"{run.name}_export_cleared"
    tasks = finish(d, run, "success", e2e_report)
    after = {t: ti["try_number"] for t, ti in api.task_instances(run.run_id).items()}
    assert after["export"] == tries["export"] + 1, tasks
    for task in ("train", "wait_for_rewards", "start_backend"):
        assert after[task] == tries[task], f"{task} ran again"


@pytest.mark.defers
def test_restarted_right_after_a_burst_of_log_lines(deployment: Deployment, e2e_report) -> None:
    """The training logs BURST reward lines at once; right after, the triggerer and the
    scheduler are stopped gracefully (SIGTERM, as Kubernetes stops a
    Composer component's pod) and started again: the run ends as usual and no line of the
    burst is logged twice."""
    api, procs = deployment.api(), deployment.processes
    run = start_run(
        deployment,
        api,
        "restarted_after_burst",
        hold_training_s=UNTIL_RELEASED_S,
        burst_lines=BURST,
    )
    wait_for_event(api, run, run.training_held, "training's first evaluation")
    first = "Intermediate Eval step=10 "  # the trigger is reading the log
    api.wait(
        "the wait's first line", lambda: first in task_log(deployment, run, WAIT), LOADED_WAIT_S
    )
    run.burst_due.set()
    assert run.burst_logged.wait(LOADED_WAIT_S), "no burst"
    procs.restart("triggerer", "scheduler")
    run.training_released.set()
    cleanups_ran(finish(deployment, run, "success", e2e_report))
    logged = task_log(deployment, run, WAIT)
    twice = [i for i in range(BURST + 1) if logged.count(burst_marker(i)) != 1]
    assert not twice, f"burst lines {twice} not logged exactly once"


@pytest.mark.relaunches
def test_dagrun_timeout_mid_training(deployment: Deployment, e2e_report) -> None:
    """The deployer's dagrun_timeout (TPU_RL_DAGRUN_TIMEOUT_MINUTES) passes while the reward wait
    is deferred: the scheduler fails the run and skips its teardowns, and the timeout callback
    (in the DAG processor) removes the run's Kubernetes objects and has GKE delete the cluster
    the run created, its nodes with it. No janitor.

    Runs last in its group (conftest.relaunch_order): it restarts the scheduler and DAG
    processor with a 0.5-minute timeout (the DAG reads it when parsed; the run is older than
    that when they are back), and no later scenario has to put them back.
    """
    api, box = deployment.api(), deployment.sandbox
    # the training's own limit (runs.LOADED_LIMITS) must not end the wait first
    run = start_run(deployment, api, "dagrun_timeout", hold_training_s=UNTIL_RELEASED_S)
    wait_for_event(api, run, run.training_held, "training's first evaluation")
    api.wait_task(run.run_id, "wait_for_rewards", {"deferred"})
    timeout = {"TPU_RL_DAGRUN_TIMEOUT_MINUTES": "0.5"}
    deployment.relaunch({"dag-processor": timeout, "scheduler": timeout})
    cluster = run.settings["cluster_name"]

    def left_none() -> bool:
        nodes = [n for n in box.nodes() if n.startswith(f"gke-{cluster}-")]
        return not box.leftovers(run.label) + nodes + [c for c in box.clusters() if c == cluster]

    api.wait("the run to time out", lambda: api.run(run.run_id)["state"] == "failed", LOADED_WAIT_S)
    what = "the timeout callback to remove the run's objects, nodes and cluster"
    api.wait(what, left_none, LOADED_WAIT_S)
    tasks = finish(deployment, run, "failed", e2e_report)
    assert tasks["cleanup_cluster"] == "skipped", tasks  # the callback, not the teardown
    # each skipped teardown's own record says the callback ran in its place
    skipped = "Skipped by dagrun_timeout; the timeout callback ran in its place."

    def notes() -> list[str]:
        tis = api.task_instances(run.run_id)
        return [tis[t].get("note") or "" for t in ("cleanup_kubernetes", "cleanup_cluster")]

    def noted() -> bool:
        return all(n.startswith(skipped) for n in notes())

    api.wait("the teardowns' notes", noted, LOADED_WAIT_S)
    kubernetes, cluster_note = (n.split("\n\n") for n in notes())
    # what the callback removed, by kind (jobsets, jobs, secrets: whichever it found)
    assert kubernetes[1].startswith("Removed: ") and "-train" in kubernetes[1], kubernetes
    assert cluster_note[1] == f"Cluster {cluster}: deletion started (GKE completes it)"
