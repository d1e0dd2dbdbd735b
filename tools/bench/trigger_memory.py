"""trigger_peak_memory_mib: a triggerer process's peak memory while the reward trigger reads
a 64 MiB line without a newline, or starts late on a 64 MiB backlog, over its baseline.

One fresh process (tools/bench/trigger_child.py) runs the trigger on four training Jobs in turn,
against the sandbox's emulator in this one: an ordinary run first (its peak RSS then is the
baseline: every module loaded, one whole wait done), then a 16 MiB and a 64 MiB line without a
newline, then a 64 MiB backlog. Linear time: the CPU seconds of the 64 MiB line against the
16 MiB one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sandbox.controller import Controller, Scenario
from sandbox.harness import Sandbox, Workloads, build_scenario
from sandbox.pod_scripts import PodScript, exit, log, sleep
from sandbox.workloads import EvalResult, absl
from tools.bench.log_reads import fetched
from tools.bench.metric import metric
from tools.bench.trigger_child import MARK
from tools.bench.workload import new_run, train_job_name

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
GOAL_MIB = 32.0
LINEAR_LIMIT = 4 * 1.3  # a 64 MiB line may take 4x a 16 MiB one's CPU, and 30% more
TIME_SCALE = 0.002
POLL_S = 10.0
PRE = EvalResult(corr=8, mean_reward=0.0821)
POST = EvalResult(corr=12, mean_reward=0.1234)
NORMAL_LINE = "I1129 10:00:00.000000 1 train_rl.py:1] " + "y" * 4050 + "\n"


def long_line(mib: int) -> PodScript:
    """A Pre line, `mib` MiB without a newline, then the Post line on a line of its own."""
    return PodScript(
        [
            log(absl("W", f"Pre RL Training: {PRE.fields()}")),
            sleep(500),
            log("z" * (mib * MIB)),
            log("\n"),
            log(absl("W", f"Post RL Training: {POST.fields()}")),
            sleep(600),
            exit(0),
        ]
    )


def backlog(mib: int) -> PodScript:
    """`mib` MiB of ordinary lines at once, then, later, the Post line."""
    return PodScript(
        [
            log(absl("W", f"Pre RL Training: {PRE.fields()}")),
            log(NORMAL_LINE * (mib * MIB // len(NORMAL_LINE))),
            sleep(3000),  # the trigger starts while this sleeps: the whole backlog is there
            log(absl("W", f"Post RL Training: {POST.fields()}")),
            sleep(600),
            exit(0),
        ]
    )


def child(args: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'plugins'}{os.pathsep}{REPO}"}
    done = subprocess.run(
        [sys.executable, "-m", "tools.bench.trigger_child", json.dumps(args)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode or not lines:
        raise RuntimeError(f"the trigger process failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix(MARK))


def measure(box: Sandbox, conf: dict[str, Any]) -> dict[str, Any]:
    """One triggerer process follows the cases in order; the first is an ordinary run."""
    scripts = {
        "ordinary": None,
        "line_16_mib": long_line(16),
        "line_64_mib": long_line(64),
        "backlog_64_mib": backlog(64),
    }
    jobs, layouts, scenario = {}, {}, Scenario()
    for case, script in scripts.items():
        layouts[case] = layout = new_run(box, conf, backend=False)
        jobs[case] = train_job_name(layout)
        if script is not None:
            scenario.on(jobs[case], script)
    ordinary = build_scenario(conf, box.gcs, Workloads())
    scenario.rules += ordinary.rules
    args = {
        "url": box.emu.url,
        "ca_b64": box.emu.ca_b64,
        "token": box.emu.token,
        "namespace": conf.get("namespace", "default"),
        "jobs": jobs,
        "poll_s": POLL_S,
    }
    with Controller(box.emu, scenario, time_scale=TIME_SCALE):
        cases = child(args)
    if any(c["status"] != "success" for c in cases.values()):
        raise RuntimeError(f"the trigger did not find every Post line: {cases}")
    for case, layout in layouts.items():
        cases[case]["log_bytes_fetched"] = fetched(box.emu, layout)[0]
    base = cases["ordinary"]["peak_rss_kib"]
    over = {k: round((c["peak_rss_kib"] - base) / 1024, 1) for k, c in cases.items()}
    cpu_ratio = cases["line_64_mib"]["cpu_s"] / max(cases["line_16_mib"]["cpu_s"], 1e-3)
    entry = metric(
        max(over.values()),
        0.0,
        unit="MiB",
        goal=GOAL_MIB,
        baseline_is="the same triggerer process after an ordinary run (its peak RSS then)",
        details={
            "peak_rss_over_baseline_mib_after_each_case": over,
            "baseline_peak_rss_mib": round(base / 1024, 1),
            "cases": cases,
            "cpu_ratio_64_to_16_mib_line": round(cpu_ratio, 2),
            "linear_time": cpu_ratio <= LINEAR_LIMIT,
        },
    )
    entry["goal_met"] = entry["goal_met"] and cpu_ratio <= LINEAR_LIMIT
    entry["goal"] += (
        f" over the baseline, and a 64 MiB line <= {LINEAR_LIMIT:g}x a 16 MiB one's CPU"
    )
    return entry
