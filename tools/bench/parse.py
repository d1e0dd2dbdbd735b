"""parse_overhead_ms and parse_ratio: each DAG file's parse against a bare DAG's, as Airflow parses.

One DAG-processor stand-in (tools/bench/parse_child.py) parses every file, as one processor
parses a DAG folder: before each parse its parent pre-imports the `airflow.*` modules the file
names (`_pre_import_airflow_modules`) and calls `gc.freeze()`, then forks one child, which runs
the processor's `_parse_file`. The bare DAGs have the same provider operators and task count,
with nothing of ours. Files take turns (the order reversed every other round), so both sides see
the same machine load; medians are compared.
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

from tools.bench.metric import metric
from tools.bench.parse_child import CHILD_START, MARK

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "dags" / "tpu_rl_post_training.py"
JANITOR_FILE = REPO / "dags" / "tpu_rl_janitor.py"
GOAL_MS = 25.0
RUNS = 11  # parses of each file

BARE_MAIN = '''"""Bare DAG: the provider operators the real one uses, EmptyOperator for the rest."""
from datetime import datetime

from airflow.providers.google.cloud.operators.gcs import GCSCreateBucketOperator
from airflow.providers.google.cloud.operators.kubernetes_engine import GKEStartJobOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, chain

CLUSTER = {{"project_id": "p", "location": "us-east5", "cluster_name": "c"}}

with DAG(dag_id="bare_tpu_rl", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    tasks = [GKEStartJobOperator(task_id=f"job_{{i}}", **CLUSTER) for i in range(3)]
    tasks.append(GCSCreateBucketOperator(task_id="bucket", bucket_name="b", project_id="p"))
    tasks += [EmptyOperator(task_id=f"empty_{{i}}") for i in range({tasks} - 4)]
    chain(*tasks)
'''

BARE_JANITOR = '''"""Bare janitor: its shape (sweep, mapped destroy, verdict), none of ours."""
from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, task

with DAG(dag_id="bare_janitor", schedule="*/30 * * * *", start_date=datetime(2026, 1, 1),
         catchup=False, params={{"project": "", "dry_run": True}}):
    sweep = EmptyOperator(task_id="sweep")

    @task
    def clusters_to_destroy() -> list[dict]:
        return []

    @task
    def destroy_cluster(settings: dict) -> None:
        return None

    @task(trigger_rule="all_done")
    def report() -> dict:
        return {{}}

    mapped = destroy_cluster.expand(settings=clusters_to_destroy())
    [sweep, mapped] >> report()
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
            "PYTHONPATH": f"{REPO / 'plugins'}{os.pathsep}{REPO}",
        }
    )
    return env


def processor(paths: list[Path], runs: int, env: dict[str, str], *flags: str) -> tuple[dict, str]:
    """Parse each file `runs` times in one DAG-processor stand-in; ({ms, tasks}, its stderr)."""
    done = subprocess.run(
        [sys.executable, *flags, "-m", "tools.bench.parse_child", str(runs), *map(str, paths)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    results = [
        json.loads(line.removeprefix(MARK))
        for line in done.stdout.splitlines()
        if line.startswith(MARK)
    ]
    if done.returncode or len(results) != runs * len(paths):
        raise RuntimeError(f"parsing {paths} failed:\n{done.stderr[-3000:]}")
    times: dict[str, list[float]] = {str(path): [] for path in paths}
    cpu: dict[str, list[float]] = {str(path): [] for path in paths}
    tasks: dict[str, int] = {}
    for result in results:
        if result["errors"]:
            raise RuntimeError(f"parsing {result['file']} failed: {result['errors']}")
        times[result["file"]].append(result["seconds"] * 1000)
        cpu[result["file"]].append(result["cpu_seconds"] * 1000)
        tasks[result["file"]] = result["tasks"]
    return {"ms": times, "cpu_ms": cpu, "tasks": tasks}, done.stderr


def child_imports(path: Path, env: dict[str, str]) -> dict[str, float]:
    """The modules a parse itself imports (not pre-imported), slowest first: cumulative ms."""
    _, err = processor([path], 1, env, "-X", "importtime")
    child = err.split(CHILD_START)[-1]  # the timed child's lines come after its marker
    top: dict[str, float] = {}
    for line in child.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        if len(name) - len(name.lstrip()) <= 1:  # depth 0: what the file and DagBag import
            top[name.strip()] = round(int(cumulative) / 1000, 1)
    return dict(sorted(top.items(), key=lambda kv: -kv[1])[:10])


def compare(ours: Path, bare: Path, parsed: dict) -> dict[str, Any]:
    ours_ms, bare_ms = parsed["ms"][str(ours)], parsed["ms"][str(bare)]
    tasks = {"ours": parsed["tasks"][str(ours)], "bare": parsed["tasks"][str(bare)]}
    if tasks["ours"] != tasks["bare"]:
        raise RuntimeError(f"the bare DAG's task count differs from {ours.name}'s: {tasks}")
    ours_median, bare_median = statistics.median(ours_ms), statistics.median(bare_ms)
    ours_cpu = statistics.median(parsed["cpu_ms"][str(ours)])
    bare_cpu = statistics.median(parsed["cpu_ms"][str(bare)])
    return {
        "file": ours.name,
        # CPU time of the parsing child: less inflated than wall time on a busy machine
        "cpu_overhead_ms": round(ours_cpu - bare_cpu, 2),
        "cpu_median_ms": {"ours": round(ours_cpu, 2), "bare": round(bare_cpu, 2)},
        "overhead_ms": round(ours_median - bare_median, 2),
        "ratio": round(ours_median / bare_median, 3),
        "median_ms": {"ours": round(ours_median, 2), "bare": round(bare_median, 2)},
        "runs_ms": {"ours": [round(t, 1) for t in ours_ms], "bare": [round(t, 1) for t in bare_ms]},
        "tasks": tasks["ours"],
    }


def task_count(path: Path) -> int:
    from sandbox.dagbags import DagBag

    bag = DagBag(str(path))
    return sum(len(dag.tasks) for dag in bag.dags.values())


def measure() -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="tpu-rl-bench-parse-") as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        env = child_env(root / "home")
        bare, janitor = root / "bare.py", root / "bare_janitor.py"
        bare.write_text(BARE_MAIN.format(tasks=task_count(DAG_FILE)))
        janitor.write_text(BARE_JANITOR.format())
        parsed, _ = processor([DAG_FILE, bare, JANITOR_FILE, janitor], RUNS, env)
        files = {
            "post_training": compare(DAG_FILE, bare, parsed),
            "janitor": compare(JANITOR_FILE, janitor, parsed),
        }
        for name, path in (("post_training", DAG_FILE), ("janitor", JANITOR_FILE)):
            if files[name]["overhead_ms"] > GOAL_MS:
                files[name]["imports_in_each_parse_ms"] = child_imports(path, env)
    worst = max(files.values(), key=lambda f: f["overhead_ms"])
    how = (
        "parent pre-imports the file's airflow.* modules (_pre_import_airflow_modules), "
        "gc.freeze(), fork; the child runs the processor's _parse_file (DagBag + serialization); "
        f"{RUNS} parses of each file in one processor, files taking turns, medians"
    )
    overhead = metric(
        worst["overhead_ms"],
        0.0,
        unit="ms",
        goal=GOAL_MS,
        baseline_is="bare DAG, same provider operators and task count (overhead 0 by definition)",
        details={
            "worst_file": worst["file"],
            "how": how,
            **files,
        },
    )
    worst_ratio = max(files.values(), key=lambda f: f["ratio"])
    ratio = metric(
        worst_ratio["ratio"],
        1.0,
        unit="ratio",
        goal=1 + GOAL_MS / worst_ratio["median_ms"]["bare"],
        baseline_is="bare DAG, same provider operators and task count (ratio 1 by definition)",
        details={
            "worst_file": worst_ratio["file"],
            "per_file": {k: f["ratio"] for k, f in files.items()},
            "goal": "the overhead goal as a ratio to that file's bare parse",
        },
    )
    return {"parse_overhead_ms": overhead, "parse_ratio": ratio}
