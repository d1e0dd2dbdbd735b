"""Capacity-trace figures, computed from the runs of
tools/bench/trace_runs.py (the trace and the runs are described there).
python -m tools.bench.capacity_trace: this phase alone.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from sandbox.ledger import Lifetime
from tools.bench import trace_spans as ts
from tools.bench.capacity import PROVISIONING_DELAY_S, SCALE_DOWN_IDLE_S
from tools.bench.metric import metric
from tools.bench.trace_runs import (
    CALENDAR_OPENS_S,
    CONF,
    END_MAX_RUN_S,
    END_STEP_S,
    END_TIME_SCALE,
    LADDER,
    PENDING_TIMEOUT_MIN,
    RUNG1_OUT_S,
    RUNG2_OUT_S,
    RUNG_WAIT_S,
    SPOT_PREEMPT_AT,
    STEP_S,
    TRACE_BATCHES,
    TRACE_STEP_S,
    TRACE_TIME_SCALE,
    ZONE_A,
    ZONE_B,
    brief,
    collect,
    ends,
    first_step,
    problems,
)

REACTION_S = 600.0  # the goal's allowance past the earliest availability (10 minutes)
TRACE_NOTE = (
    f"time_scale {TRACE_TIME_SCALE}: a wall s is {1 / TRACE_TIME_SCALE:g} simulated s. The "
    "trace is the issue's, not compressed (6 h, 1 h); of its simulated week only the run's span "
    "is played. The product's waits are wall time and start at the backend's TPU request: both "
    f"runs have pending_timeout_minutes {PENDING_TIMEOUT_MIN} "
    f"({PENDING_TIMEOUT_MIN * 60 / TRACE_TIME_SCALE:g} simulated s, past rung 1's "
    f"{RUNG1_OUT_S:g} s); the ladder's rung_wait_seconds {RUNG_WAIT_S} is "
    f"{RUNG_WAIT_S / TRACE_TIME_SCALE:g} simulated s on its first rung (its last rung waits the "
    "pending timeout). Airflow's own work (task starts, 1 s polls) reads the same on both sides"
)

TRACE_SETTINGS = {**TRACE_BATCHES, "train_step_s": TRACE_STEP_S,
                  "provisioning_delay_s": PROVISIONING_DELAY_S,
                  "pending_timeout_minutes": PENDING_TIMEOUT_MIN,
                  "rung_wait_seconds": {"ladder": RUNG_WAIT_S},
                  "scale_down_idle_s": SCALE_DOWN_IDLE_S}  # fmt: skip


def time_to_first_step(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ladder, base = runs["ladder"], runs["baseline"]
    wrong = problems(ladder, "ladder") + problems(base, "baseline")
    moved = [(r["rung"], r["outcome"]) for r in ladder["rungs"]]
    if moved != [(f"flex_start@{ZONE_B}", "no_slice"), (f"flex_start@{ZONE_A}", "ready")]:
        wrong.append(f"the ladder run did not move from rung 1 to rung 2: {moved}")
    m = metric(
        first_step(ladder, "ladder"),
        first_step(base, "baseline"),
        unit="s",
        goal=RUNG2_OUT_S + REACTION_S,
        baseline_is=(
            f"the same run on one rung (flex_start@{ZONE_B}, capacity_ladder empty) with "
            f"pending_timeout_minutes {PENDING_TIMEOUT_MIN}, long enough to wait out its 6 hours"
        ),
        details={
            "value_is": (
                "simulated seconds from the run's start (clock 0, when the trace starts) to the "
                f"start of the first training step (logged time less the {TRACE_STEP_S:g} s "
                f"step), with capacity_ladder '{LADDER}'"
            ),
            "goal_is": "rung 2's earliest availability (3600 s) plus 10 minutes",
            "problems": wrong,
            "trace": {f"flex_start@{ZONE_B}": [0, RUNG1_OUT_S], f"flex_start@{ZONE_A}": [0, 3600]},
            "note": TRACE_NOTE,
            "settings": TRACE_SETTINGS,
            "runs": {k: brief(runs[k]) for k in ("ladder", "baseline")},
        },
    )
    m["goal_met"] = m["goal_met"] and not wrong
    return m


def billed(run: dict[str, Any], job: str, conf: dict[str, Any]) -> dict[str, Any]:
    """TPU node-hours without a training step, against a static pool over the whole run."""
    nodes = [Lifetime(*n) for n in run["nodes"]]
    until, step_s = run["until"], STEP_S[job]
    training = ts.step_spans(ends(run), step_s)
    host_count = ts.hosts(nodes, until)
    events = ts.capacity_events([r["outcome"] for r in run["rungs"]], run["record"])
    first, last = (training[0][0], training[-1][1]) if training else (until, until)
    phases = {"before_first_step": (0.0, first), "in_training": (first, last),
              "after_last_step": (last, until)}  # fmt: skip
    wrong = problems(run, job) + ([] if events else [f"no capacity event in the {job} run"])
    m = metric(
        ts.idle_node_seconds(nodes, training, until) / 3600,
        ts.static_pool_idle_seconds(host_count, 0.0, until, training) / 3600,
        unit="node-hours",
        goal=events * conf["checkpoint_period"] * step_s * host_count / 3600,
        baseline_is=(
            f"a static pool of the slice's {host_count} hosts from the run's start (deploy) to "
            "its end (destroy), as a reservation's: its hours with no training step, same run"
        ),
        details={
            "value_is": "TPU node lifetimes (a node is a host) less the times a step ran",
            "goal_is": f"{events} capacity event(s) (rungs left, attempts ended for capacity) x "
            f"checkpoint_period x step {step_s:g} s x {host_count} hosts",
            "node_hours_by_phase": {
                k: round(ts.idle_node_seconds(nodes, training, until, w) / 3600, 3)
                for k, w in phases.items()
            },
            "node_hours_total": round(sum(n.seconds(until) for n in nodes) / 3600, 3),
            "training_spans": [[round(a), round(b)] for a, b in training],
            "problems": wrong,
            "run": brief(run),
        },
    )
    m["goal_met"] = m["goal_met"] and not wrong
    return m


def lost(run: dict[str, Any], job: str, baseline: int, goal: int, **why: Any) -> dict[str, Any]:
    """Steps computed twice (ledger.steps_recomputed) in `run`, against `baseline`."""
    wrong = problems(run, job) + why.pop("problems")
    m = metric(run["steps_recomputed"], baseline, unit="steps", goal=goal,
               baseline_is=why.pop("baseline_is"),
               details={"problems": wrong, **why, "run": brief(run)})  # fmt: skip
    m["goal_met"] = m["goal_met"] and not wrong
    return m


def steps_lost(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    end, spot, period = runs["capacity_end"], runs["spot"], CONF["spot"]["checkpoint_period"]
    first = first_step(end, "capacity_end")
    cut = min((n[3] for n in end["nodes"] if n[3] <= first), default=first) + END_MAX_RUN_S
    capacity_lost = [a for a in spot["attempts"] if a["outcome"] == "capacity_lost"]
    stopped = "stopped_at_save" in end["record"]
    return {
        "steps_lost_at_capacity_end": lost(
            end, "capacity_end", ts.naive_steps_lost(first, END_STEP_S, cut, period), 0,
            problems=[] if stopped else [f"training did not stop at a save: {end['record']}"],
            baseline_is=(
                "a product that trains on until the nodes' max run duration takes them (no stop "
                "at a save before the capacity ends): the steps that would finish on the first "
                "slice past its last save, "
                "from this run's first step, step time and the slice's creation"
            ),
            flex_max_run_s=END_MAX_RUN_S, train_step_s=END_STEP_S, checkpoint_period=period,
            first_slice_ends=round(cut),
        ),
        "steps_lost_at_capacity_end_calendar": calendar_lost(runs["calendar_end"]),
        "steps_lost_at_capacity_end_spot": lost(
            spot, "spot", sum(len(a["steps"]) for a in capacity_lost), period,
            problems=[] if capacity_lost else ["no TPU node was preempted in training"],
            baseline_is="a restart from scratch: every step of the attempts that lost their node",
            preempted_after_step=SPOT_PREEMPT_AT, notice_s=30, checkpoint_period=period,
        ),
    }  # fmt: skip


def calendar_lost(run: dict[str, Any]) -> dict[str, Any]:
    """Steps computed twice when a calendar window ends mid-training, against a product that
    trains on until Compute Engine deletes the window's VMs."""
    period = CONF["calendar_end"]["checkpoint_period"]
    first, moved = first_step(run, "calendar_end"), [r["outcome"] for r in run["rungs"]]
    stopped = "stopped_at_save" in run["record"] and moved == ["capacity_ended", "ready"]
    return lost(
        run, "calendar_end", ts.naive_steps_lost(first, END_STEP_S, run["window_ends"], period),
        0, problems=[] if stopped else [f"not stopped at a save, then moved: {run['record']}, "
                                        f"{moved}"],
        baseline_is=(
            "a product that trains on until the window's end deletes the VMs: the steps that "
            "would finish before the end past its last save, from this run's first step"
        ),
        window_s=[CALENDAR_OPENS_S / END_TIME_SCALE, run["window_ends"]],
        train_step_s=END_STEP_S, checkpoint_period=period,
        capacity_ladder=CONF["calendar_end"]["capacity_ladder"],
    )  # fmt: skip


def figures(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        "time_to_first_step_s": time_to_first_step(runs),
        **{
            f"tpu_hours_billed_without_training_{job}": billed(runs[job], job, CONF[job])
            for job in ("ladder", "capacity_end")
        },
        **steps_lost(runs),
    }


def measure(tmp: Path) -> dict[str, dict[str, Any]]:
    return figures(collect(tmp))


def main() -> None:
    """The phase alone: its runs, then its figures."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tpu-rl-trace-") as tmp:
        runs = collect(Path(tmp))
    print("RUNS " + json.dumps(runs))
    print(json.dumps(figures(runs), indent=2))
    print(f"capacity-trace phase: {time.monotonic() - began:.0f} s wall")


if __name__ == "__main__":
    main()
