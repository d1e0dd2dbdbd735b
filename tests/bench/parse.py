"""parse_overhead_ratio: parse time of the DAG file / a bare DAG with the same operators.

Each parse runs in a fresh process set up as Airflow's DAG processor sets up the one that
parses a file: `import airflow` and the DagBag module first (untimed), then `gc.freeze()`, as
the processor's manager calls it before forking (dag_processing/manager.py, before_run), so
the collector's full passes skip that heap; then `DagBag(<file>)` is timed. Byte-code is
cached as on a DAG processor: one untimed parse of each file first writes every module's .pyc
(under a private PYTHONPYCACHEPREFIX), so neither side pays compiling. Ours and the bare DAG
alternate, RUNS times each, and the medians are compared. Each process also parses its file a
second time, imports cached, to show what executing the file costs apart from its imports.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.bench.metric import metric

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "dags" / "tpu_rl_post_training.py"
GOAL = 1.15
RUNS = 7
MARK = "BENCH-PARSE "

CHILD = f"""
import gc, json, sys, time
import airflow
from airflow.dag_processing.dagbag import DagBag
gc.freeze()
start, cpu = time.perf_counter(), time.process_time()
bag = DagBag(sys.argv[1])
seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
warm = time.perf_counter()
DagBag(sys.argv[1])  # again, every import cached: what executing the file itself costs
warm_seconds = time.perf_counter() - warm
tasks = sum(len(dag.tasks) for dag in bag.dags.values())
result = {{"seconds": seconds, "cpu_seconds": cpu_seconds, "warm_seconds": warm_seconds,
          "tasks": tasks, "errors": list(bag.import_errors)}}
print({MARK!r} + json.dumps(result))
"""

BARE = '''"""Bare DAG: the provider operators the real one uses, EmptyOperator for the rest."""
from datetime import datetime

from airflow.providers.google.cloud.operators.gcs import GCSCreateBucketOperator
from airflow.providers.google.cloud.operators.kubernetes_engine import GKEStartJobOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, chain

CLUSTER = {{"project_id": "p", "location": "us-east5", "cluster_name": "c"}}

with DAG(dag_id="bare_tpu_rl", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    tasks = [GKEStartJobOperator(task_id=f"job_{{i}}", **CLUSTER) for i in range(3)]
    tasks.append(GCSCreateBucketOperator(task_id="bucket", bucket_name="b", project_id="p"))
    tasks += [EmptyOperator(task_id=f"empty_{{i}}") for i in range({empty})]
    chain(*tasks)
'''


def child_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AIRFLOW") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "PYTHONPYCACHEPREFIX": str(home / "pycache"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "PYTHONPATH": str(REPO / "plugins"),
        }
    )
    return env


def parse_once(path: Path, env: dict[str, str], cwd: Path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *flags, "-c", CHILD, str(path)],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def timed(path: Path, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    out, err = parse_once(path, env, cwd).communicate()
    lines = [line for line in out.splitlines() if line.startswith(MARK)]
    if not lines:
        raise RuntimeError(f"parsing {path} printed no result:\n{err[-2000:]}")
    result = json.loads(lines[-1].removeprefix(MARK))
    if result["errors"]:
        raise RuntimeError(f"parsing {path} failed: {result['errors']}")
    return result


def import_times(path: Path, env: dict[str, str], cwd: Path) -> list[tuple[int, int, int, str]]:
    """(self us, cumulative us, depth, module) from `python -X importtime`, in print order."""
    _, err = parse_once(path, env, cwd, "-X", "importtime").communicate()
    rows = []
    for line in err.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append((int(own), int(cumulative), depth, name.strip()))
    return rows


def extra_imports(ours: Path, bare: Path, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """What the DAG file imports that the bare DAG does not, biggest first (milliseconds).

    A module's cost is its own import time plus that of the extra modules it pulled in (not
    modules the bare DAG imports too, which importtime would count where they came first).
    """
    bare_names = {row[3] for row in import_times(bare, env, cwd)}
    cost: dict[str, int] = {}
    stack: list[tuple[int, int]] = []  # (depth, extra us below and at it); children come first
    total = 0
    for own, _, depth, name in import_times(ours, env, cwd):
        extra = own if name not in bare_names else 0
        total += extra
        while stack and stack[-1][0] > depth:
            extra += stack.pop()[1]
        stack.append((depth, extra))
        if name not in bare_names:
            cost[name] = extra
    top = sorted(cost.items(), key=lambda kv: -kv[1])
    return {
        "extra_modules": len(cost),
        "extra_import_ms_total": round(total / 1000, 1),
        "top_modules_ms": {name: round(us / 1000, 1) for name, us in top[:12]},
    }


def measure(task_count: int) -> dict[str, Any]:
    """Parse ours and the bare DAG RUNS times each, alternating, in fresh processes."""
    with tempfile.TemporaryDirectory(prefix="tpu-rl-bench-parse-") as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        bare = root / "bare_dag.py"
        bare.write_text(BARE.format(empty=task_count - 4))
        env = child_env(root / "home")
        times: dict[str, list[float]] = {"ours": [], "bare": []}
        cpu: dict[str, list[float]] = {"ours": [], "bare": []}
        warm: dict[str, list[float]] = {"ours": [], "bare": []}
        tasks: dict[str, int] = {}
        for path in (DAG_FILE, bare):  # writes the byte-code caches; not timed
            timed(path, env, root)
        for run in range(RUNS):
            order = [("ours", DAG_FILE), ("bare", bare)]
            for name, path in order if run % 2 == 0 else reversed(order):
                result = timed(path, env, root)
                times[name].append(result["seconds"])
                cpu[name].append(result["cpu_seconds"])
                warm[name].append(result["warm_seconds"])
                tasks[name] = result["tasks"]
        ours_s, bare_s = statistics.median(times["ours"]), statistics.median(times["bare"])
        ratio = ours_s / bare_s
        details: dict[str, Any] = {
            "ours_median_s": round(ours_s, 4),
            "bare_median_s": round(bare_s, 4),
            "ours_runs_s": [round(t, 4) for t in times["ours"]],
            "bare_runs_s": [round(t, 4) for t in times["bare"]],
            "median_of_paired_ratios": round(
                statistics.median(o / b for o, b in zip(times["ours"], times["bare"], strict=True)),
                4,
            ),
            "cpu_ratio_of_medians": round(
                statistics.median(cpu["ours"]) / statistics.median(cpu["bare"]), 4
            ),
            "second_parse_median_s": {k: round(statistics.median(v), 4) for k, v in warm.items()},
            "tasks": tasks,
            "runs_each": RUNS,
        }
        if ratio > GOAL:
            details["what_ours_imports_more"] = extra_imports(DAG_FILE, bare, env, root)
    return metric(
        ratio,
        1.0,
        unit="ratio",
        goal=GOAL,
        baseline_is="bare DAG, same operators and task count (ratio 1 by definition)",
        details=details,
    )
