"""Capacity figures, from the sandbox ledger of whole DAG runs (sandbox/ledger.py).

steps_recomputed_after_preemption: one run on Spot capacity (100 batches, a checkpoint every 50)
whose TPU node is preempted when the client logs step PREEMPT_AT_STEP; the product resumes from
the newest complete checkpoint. Value: the steps a later client attempt executed again.
Baseline: what a restart from scratch (a plain retry of the training Job, no resume)
recomputes: every step the attempts that lost their capacity had executed.

tpu_node_utilization_ratio: the same successful run (no preemption) twice, each deploying its own
cluster (cluster_mode=create) and destroying it at the end: capacity=flex_start (the value) and
capacity=reservation (the baseline). Ratio: chip-seconds TPU nodes existed / chip-seconds pods
needing google.com/tpu ran, over the whole run. A reservation pool is static (deploy to destroy);
a flex-start pool scales from zero when TPU pods wait and back when a slice is idle for
SCALE_DOWN_IDLE_S.

Time: pods and nodes live on the sandbox's simulated clock; Airflow's own work (task starts,
polls of poll_interval_seconds=1) takes wall time, which the clock stretches by 1 / time_scale.
UTILIZATION_TIME_SCALE keeps the gaps between TPU phases near production's (a few wall seconds
read as one to three minutes, not as longer than GKE's 10-minute scale-down), with a short
training to keep the bench short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sandbox.harness import FLEX, PREEMPTIBLE, SETTINGS, SPOT, RunResult, Sandbox, Workloads
from sandbox.ledger import Ledger, Lifetime
from tools.bench.metric import metric

MARK = "BENCH-CAPACITY "
REPO = Path(__file__).resolve().parents[2]
PREEMPT_AT_STEP = 60
SPOT_TIME_SCALE = 0.001  # the e2e Spot scenario's: the figure is a count of steps, not a time
# GKE's cluster autoscaler removes a node unneeded for 10 minutes (scale-down-unneeded-time);
# a flex-start slice comes in minutes when the zone has capacity (README: "in minutes").
SCALE_DOWN_IDLE_S = 600.0
PROVISIONING_DELAY_S = 300.0
# One wall second of Airflow's own work (a task start, a poll) reads as 50 simulated seconds:
# the gaps between TPU phases come out at one to three minutes, as long as production's or
# longer (against flex-start); the tutorial's 50-batch training takes about a wall minute, so
# each run has its own process: the Spot run beside other phases, these two side by side.
UTILIZATION_TIME_SCALE = 0.02
# No resume in these runs (nothing preempts them): with max_training_restarts > 0 validate
# would ask for a checkpoint before the last step, which adds a save to the figure.
UTILIZATION_BATCHES = {"num_batches": 50, "checkpoint_period": 50, "max_training_restarts": 0}
UTILIZATION_GOAL = 1.15
RUNS = {
    "flex_start": {**FLEX, **UTILIZATION_BATCHES, "cluster_mode": "create"},
    "reservation": {
        **PREEMPTIBLE,
        **UTILIZATION_BATCHES,
        "cluster_mode": "create",
        "capacity": "reservation",
        "reservation": SETTINGS["reservation"],
    },
}


def run(tmp: Path, conf: dict[str, Any], workloads: Workloads, time_scale: float) -> RunResult:
    """One whole DAG run in a fresh sandbox (Airflow's database as it is)."""
    tmp.mkdir()
    with Sandbox(tmp).up() as box:
        return box.run(conf, workloads, time_scale)


def not_succeeded(result: RunResult) -> dict[str, Any]:
    """The run's state and the tasks that did not succeed (empty when all did)."""
    return {
        "run_state": result.state,
        "tasks_not_success": {k: v for k, v in result.task_states.items() if v != "success"},
    }


def steps_recomputed(tmp: Path) -> dict[str, Any]:
    conf = SPOT
    result = run(tmp, conf, Workloads(preempt_at_steps=(PREEMPT_AT_STEP,)), SPOT_TIME_SCALE)
    ledger = result.ledger
    attempts = sorted(ledger.attempts, key=lambda a: a.started)
    lost = [a for a in attempts if a.outcome == "capacity_lost"]
    problems = []
    if result.state != "success":
        problems.append(f"the run ended {result.state}, not success")
    if not result.preempted or not lost:
        problems.append("no TPU node was preempted during training: nothing was measured")
    m = metric(
        ledger.steps_recomputed(),
        sum(len(a.steps) for a in lost),
        unit="steps",
        goal=conf["checkpoint_period"],
        baseline_is=(
            "a restart from scratch (a plain retry of the training Job): every step the "
            "attempts that lost their TPU capacity had executed, from this run's ledger"
        ),
        details={
            **not_succeeded(result),
            "problems": problems,
            "num_batches": conf["num_batches"],
            "checkpoint_period": conf["checkpoint_period"],
            "preempted_at_step": PREEMPT_AT_STEP,
            "preempted_nodes": result.preempted,
            "attempts": [
                {
                    "pod": a.pod,
                    "restored_step": a.restored_step,
                    "first_step": a.steps[0] if a.steps else None,
                    "last_step": a.steps[-1] if a.steps else None,
                    "steps": len(a.steps),
                    "outcome": a.outcome,
                }
                for a in attempts
            ],
            "time_scale": SPOT_TIME_SCALE,
        },
    )
    m["goal_met"] = m["goal_met"] and not problems
    return m


def spans(lifetimes: list[Lifetime], until: float) -> list[list[float]]:
    """The simulated intervals in which at least one of `lifetimes` lived, merged."""
    merged: list[list[float]] = []
    for life in sorted(lifetimes, key=lambda x: x.started):
        end = life.ended if life.ended is not None else until
        if merged and life.started <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([life.started, end])
    return [[round(a), round(b)] for a, b in merged]


def by_group(lifetimes: list[Lifetime], until: float) -> dict[str, dict[str, Any]]:
    """Per pool (nodes) or Job (pods): how many, chip-seconds, when they lived (simulated s)."""
    groups: dict[str, list[Lifetime]] = {}
    for life in lifetimes:
        if life.tpu:
            groups.setdefault(life.group, []).append(life)
    return {
        group: {
            "count": len(lives),
            "chips_each": sorted({life.tpu for life in lives}),
            "chip_seconds": round(sum(life.tpu * life.seconds(until) for life in lives)),
            "lived": spans(lives, until),
        }
        for group, lives in groups.items()
    }


def backend_waiting(ledger: Ledger, until: float) -> float:
    """Chip-seconds the backend's TPU pods ran while no training client attempt did."""
    clients = [[a.started, a.ended if a.ended is not None else until] for a in ledger.attempts]
    waiting = 0.0
    for pod in ledger.tpu_pods:
        if "-backend-" not in pod.group:
            continue
        start, end = pod.started, pod.ended if pod.ended is not None else until
        busy = sum(max(0.0, min(end, b) - max(start, a)) for a, b in clients)
        waiting += pod.tpu * max(0.0, end - start - busy)
    return waiting


def utilization(tmp: Path, mode: str) -> dict[str, Any]:
    """One successful run in `mode`: its node and pod chip-seconds, by pool and by Job."""
    workloads = Workloads(
        provisioning_delay_s=PROVISIONING_DELAY_S, scale_down_idle_s=SCALE_DOWN_IDLE_S
    )
    result = run(tmp / mode, RUNS[mode], workloads, UTILIZATION_TIME_SCALE)
    ledger = result.ledger
    until = ledger.clock()  # the run's end: the cluster is destroyed, its nodes gone
    nodes, pods = ledger.tpu_chip_seconds(until)
    return {
        **not_succeeded(result),
        "ratio": round(nodes / pods, 4) if pods else None,
        "node_chip_seconds": round(nodes),
        "pod_chip_seconds": round(pods),
        "tpu_node_seconds": round(ledger.tpu_node_seconds(until=until)),
        "tpu_pod_seconds": round(sum(p.seconds(until) for p in ledger.tpu_pods)),
        "run_simulated_s": round(until),
        "nodes_left_at_end": [n.name for n in ledger.nodes if n.tpu and n.ended is None],
        "backend_waiting_chip_seconds": round(backend_waiting(ledger, until)),
        "node_pools": by_group(ledger.nodes, until),
        "tpu_pods_by_job": by_group(ledger.tpu_pods, until),
    }


def node_utilization(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    flex, reservation = runs["flex_start"], runs["reservation"]
    problems = [
        f"the {mode} run ended {r['run_state']}, not success"
        for mode, r in runs.items()
        if r["run_state"] != "success" or not r["ratio"]
    ]
    m = metric(
        flex["ratio"] or 0.0,
        reservation["ratio"] or 0.0,
        unit="ratio",
        goal=UTILIZATION_GOAL,
        baseline_is=(
            "the same run with capacity=reservation: the tutorial's static pool, its nodes "
            "from the cluster's deploy to its destroy"
        ),
        details={
            "value_is": (
                "chip-seconds TPU nodes existed / chip-seconds pods needing google.com/tpu "
                "ran, over the whole run (simulated clock), with capacity=flex_start"
            ),
            "problems": problems,
            "runs": runs,
            "settings": {
                "cluster_mode": "create",
                **UTILIZATION_BATCHES,
                "scale_down_idle_s": SCALE_DOWN_IDLE_S,
                "provisioning_delay_s": PROVISIONING_DELAY_S,
                "time_scale": UTILIZATION_TIME_SCALE,
                "why": (
                    "scale_down_idle_s: GKE's cluster autoscaler removes a node unneeded for "
                    "10 minutes by default; provisioning_delay_s: a flex-start slice comes in "
                    "minutes when the zone has capacity; time_scale: one wall second of "
                    f"Airflow's own work (a poll, a task start) counts "
                    f"{1 / UTILIZATION_TIME_SCALE:g} simulated seconds, a 60 s training step "
                    f"{60 * UTILIZATION_TIME_SCALE:g} wall seconds"
                ),
                "bias": (
                    "the gaps between TPU phases (a few wall seconds of Airflow work) read as "
                    "one to three minutes, at least production's; a 50-batch training is "
                    "short, so the fixed costs (provisioning, image pulls, the end until the "
                    "cluster is destroyed) weigh more than in a real run: both against "
                    "flex-start. The backend's workers run before and after the client "
                    "(runs.*.backend_waiting_chip_seconds), counted as TPU pods that ran, as "
                    "they hold the TPUs in production too"
                ),
            },
        },
    )
    m["goal_met"] = m["goal_met"] and not problems
    return m


def start(
    tmp: Path, jobs: tuple[str, ...], module: str = "tools.bench.capacity"
) -> dict[str, subprocess.Popen]:
    """One child process per job (spot or a capacity mode; `module`'s), each with its own
    sandbox and Airflow database; `measure_spot` and `measure_utilization` collect them."""
    children = {}
    for job in jobs:
        home = tmp / job
        home.mkdir(parents=True)
        env = {
            **os.environ,
            "PYTHONPATH": f"{REPO / 'plugins'}{os.pathsep}{REPO}",
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        }
        command = [sys.executable, "-m", module, job, str(home)]
        with (home / "out.log").open("w") as out:  # a file: a full pipe would stall the child
            children[job] = subprocess.Popen(command, env=env, stdout=out, stderr=out)
    return children


def start_spot(tmp: Path) -> subprocess.Popen:
    """The Spot run counts steps, not seconds: it may share the machine with other phases that
    count bytes (run.py starts it beside them)."""
    return start(tmp, ("spot",))["spot"]


def measure_spot(tmp: Path, child: subprocess.Popen) -> dict[str, dict[str, Any]]:
    return {"steps_recomputed_after_preemption": child_result(child, tmp / "spot" / "out.log")}


def measure_utilization(tmp: Path) -> dict[str, dict[str, Any]]:
    """The flex-start and reservation runs side by side, one per core, nothing else running:
    the gaps between TPU phases are Airflow's wall time, and a busier machine stretches them."""
    children = start(tmp, tuple(RUNS))
    found = {job: child_result(child, tmp / job / "out.log") for job, child in children.items()}
    return {"tpu_node_utilization_ratio": node_utilization(found)}


def child_result(child: subprocess.Popen, out: Path, timeout: float = 600) -> dict[str, Any]:
    child.wait(timeout=timeout)
    lines = out.read_text(errors="replace").splitlines()
    line = next((x for x in lines if x.startswith(MARK)), None)
    if line is None:
        raise RuntimeError(f"capacity bench child exited {child.returncode}: {lines[-5:]}")
    return json.loads(line.removeprefix(MARK))


def main(job: str, home: Path) -> None:
    """In a child: one run (`job`: spot or a capacity mode); its figures after MARK."""
    from airflow.utils import db

    db.resetdb()
    found = steps_recomputed(home / "run") if job == "spot" else utilization(home, job)
    print(MARK + json.dumps(found))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
