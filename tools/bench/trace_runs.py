"""The capacity-trace bench's runs (tools/bench/capacity_trace.py): whole DAG runs on the
sandbox, each in its own child process and Airflow database (tools/bench/capacity.py's `start`),
summarised from the ledger.

Trace (simulated s from the run's start): no flex-start VMs in us-east5-b for 6 hours, none in
us-east5-a for the first hour. Runs: `ladder` (both rungs) and `baseline` (us-east5-b alone) at
TRACE_TIME_SCALE; `capacity_end` (flex-start nodes reach their max run duration mid-training,
as tests/e2e/test_capacity_end.py); `calendar_end` (a calendar window ends mid-training, then
flex-start in the other zone); `spot` (a node preempted, 30 s notice).
python -m tools.bench.trace_runs <job> <home>: one run (in a child).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sandbox.harness import (
    FLEX,
    SETTINGS,
    SPOT,
    RunResult,
    Sandbox,
    Workloads,
    write_converted,
)
from tools.bench import trace_spans as ts
from tools.bench.capacity import (
    MARK,
    PROVISIONING_DELAY_S,
    SCALE_DOWN_IDLE_S,
    UTILIZATION_TIME_SCALE,
    child_result,
    not_succeeded,
    start,
)

MODULE = "tools.bench.trace_runs"
ZONE_B, ZONE_A = "us-east5-b", "us-east5-a"
RUNG1_OUT_S, RUNG2_OUT_S = 6 * 3600.0, 3600.0  # stocked out from 0 to these
TRACE_TIME_SCALE = UTILIZATION_TIME_SCALE  # 0.02: 50 simulated s per wall s
TRACE_STEP_S = 600.0  # 12 wall s per step at TRACE_TIME_SCALE
TRACE_BATCHES = {"num_batches": 4, "checkpoint_period": 2}
PENDING_TIMEOUT_MIN = 10  # wall: 30000 simulated s, both runs: longer than rung 1's 6 hours
RUNG_WAIT_S = 12  # wall: the ladder's first rung waits 600 simulated s (10 minutes)
END_STEP_S, END_MAX_RUN_S, END_TIME_SCALE = 3000.0, 32000, 0.001
SPOT_PREEMPT_AT = 10
LADDER = f"flex_start@{ZONE_B}, flex_start@{ZONE_A}"
CONF = {
    "ladder": {**FLEX, **TRACE_BATCHES, "capacity_ladder": LADDER,
               "pending_timeout_minutes": PENDING_TIMEOUT_MIN, "rung_wait_seconds": RUNG_WAIT_S},
    "baseline": {**FLEX, **TRACE_BATCHES, "pending_timeout_minutes": PENDING_TIMEOUT_MIN},
    "capacity_end": {**FLEX, "num_batches": 16, "checkpoint_period": 4, "max_training_restarts": 1},
    "calendar_end": {**SETTINGS, "capacity": "calendar", "num_batches": 60, "checkpoint_period": 2,
                     "capacity_ladder": f"calendar@{ZONE_B}, flex_start@{ZONE_A}",
                     # as tests/e2e/test_capacity_end.py's CALENDAR: each rung's cluster limit
                     # (2 x 45 min) keeps the worst case within the DAG's time limit beside the
                     # long training limit (validate refuses the run otherwise)
                     "training_timeout_minutes": 2400, "cluster_timeout_minutes": 45},
    "spot": {**SPOT, "num_batches": 16, "checkpoint_period": 4, "max_training_restarts": 1},
}  # fmt: skip
TRACE_WORKLOADS = Workloads(train_step_s=TRACE_STEP_S, provisioning_delay_s=PROVISIONING_DELAY_S,
                            scale_down_idle_s=SCALE_DOWN_IDLE_S)  # fmt: skip
STEP_S = {"ladder": TRACE_STEP_S, "baseline": TRACE_STEP_S, "capacity_end": END_STEP_S,
          "calendar_end": END_STEP_S}  # fmt: skip
# the calendar window (wall s from the run's start): preflight asks it for checkpoint_period
# steps at an assumed 60 s (2 minutes); at END_TIME_SCALE it holds about 40 steps of END_STEP_S,
# fewer than num_batches, a save every 2
CALENDAR_OPENS_S, CALENDAR_LASTS_S = 15, 140


def run_job(job: str, home: Path) -> dict[str, Any]:
    """In a child: one whole run of `job` on its trace; what the parent computes from."""
    conf = CONF[job]
    opens = datetime.now(UTC) + timedelta(seconds=CALENDAR_OPENS_S)
    window = (opens, opens + timedelta(seconds=CALENDAR_LASTS_S))
    workloads, scale = {
        "ladder": (TRACE_WORKLOADS, TRACE_TIME_SCALE),
        "baseline": (TRACE_WORKLOADS, TRACE_TIME_SCALE),
        "capacity_end": (Workloads(train_step_s=END_STEP_S, flex_max_run_s=END_MAX_RUN_S),
                         END_TIME_SCALE),
        "calendar_end": (Workloads(train_step_s=END_STEP_S, calendar_window=window),
                         END_TIME_SCALE),
        "spot": (Workloads(preempt_at_steps=(SPOT_PREEMPT_AT,)), END_TIME_SCALE),
    }[job]  # fmt: skip
    (home / "run").mkdir()
    began = time.monotonic()
    with Sandbox(home / "run").up() as box:
        if job in ("ladder", "baseline"):
            box.capacity.stock_out("flex_start", ZONE_B, 0.0, RUNG1_OUT_S)
            box.capacity.stock_out("flex_start", ZONE_A, 0.0, RUNG2_OUT_S)
            write_converted(box.gcs, conf)  # the backend is the first to ask for the slice
        result = box.run(conf, workloads, scale)
    ran = summary(result, time.monotonic() - began, scale)
    return {**ran, "window_ends": round(result.ledger.clock.simulated_at(window[1]), 1)}


def summary(result: RunResult, wall_s: float, scale: float) -> dict[str, Any]:
    ledger, x = result.ledger, result.xcoms
    record = (x.get("wait_for_rewards.return_value") or {}).get("attempts") or x.get(
        "wait_for_rewards.attempts"
    )
    tries = x.get("create_cluster.rungs") or []  # the ladder's record (cluster.rung_record)
    return {
        **not_succeeded(result),
        "wall_s": round(wall_s, 1),
        "time_scale": scale,
        "until": ledger.clock(),
        "rungs": [{k: t.get(k) for k in ("rung", "outcome", "reason")} for t in tries],
        "record": [a.get("outcome") for a in record or []],
        "attempts": [
            {
                "pod": a.pod,
                "restored_step": a.restored_step,
                "steps": list(a.steps),
                "step_ends": [round(t, 1) for t in a.step_ends],
                "started": round(a.started, 1),
                "outcome": a.outcome,
            }
            for a in sorted(ledger.attempts, key=lambda a: a.started)
        ],
        "nodes": [[n.name, n.group, n.tpu, n.started, n.ended] for n in ledger.nodes if n.tpu],
        "steps_recomputed": ledger.steps_recomputed(),
        "preempted": result.preempted,
    }


def ends(run: dict[str, Any]) -> list[float]:
    return [t for a in run["attempts"] for t in a["step_ends"]]


def problems(run: dict[str, Any], job: str) -> list[str]:
    failed = sorted(t for t, state in run["tasks_not_success"].items() if state == "failed")
    found = (
        []
        if run["run_state"] == "success"
        else [f"the {job} run ended {run['run_state']} (failed: {', '.join(failed) or 'none'})"]
    )
    return found + ([] if ends(run) else [f"the {job} run logged no training step"])


def first_step(run: dict[str, Any], job: str) -> float:
    return ts.first_step_start(ends(run), STEP_S[job]) or 0.0


def brief(run: dict[str, Any]) -> dict[str, Any]:
    keep = ("run_state", "tasks_not_success", "wall_s", "time_scale", "rungs", "record")
    attempts = [{**a, "steps": f"{a['steps'][:1]}..{a['steps'][-1:]}"} for a in run["attempts"]]
    up = round(min((n[3] for n in run["nodes"]), default=-1))
    return {**{k: run[k] for k in keep}, "until": round(run["until"]), "attempts": attempts,
            "tpu_nodes_first_up": up, "steps_recomputed": run["steps_recomputed"]}  # fmt: skip


def collect(tmp: Path) -> dict[str, dict[str, Any]]:
    """The baseline (its 6-hour wait: ~7 wall minutes) in one child; the ladder, capacity-end,
    calendar and Spot runs one after another in a second: two runs at a time, one per core."""
    root = tmp / "capacity-trace"
    slow = start(root, ("baseline",), MODULE)["baseline"]
    runs = {}
    for job in ("ladder", "capacity_end", "calendar_end", "spot"):
        runs[job] = child_result(start(root, (job,), MODULE)[job], root / job / "out.log", 900)
    runs["baseline"] = child_result(slow, root / "baseline" / "out.log", 1200)
    return runs


def main(argv: list[str]) -> None:
    """In a child: one run of `job` in `home`, its summary printed after MARK."""
    from airflow.utils import db

    db.resetdb()
    print(MARK + json.dumps(run_job(argv[0], Path(argv[1]))))


if __name__ == "__main__":
    main(sys.argv[1:])
