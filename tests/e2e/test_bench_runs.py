"""`make bench`'s whole DAG runs (tools/bench/dag_runs.py) still run on today's sandbox: the
failing one, the shorter of the two, end to end into its bench.json entry."""

from __future__ import annotations

from sandbox.harness import Workloads
from tools.bench.dag_runs import FAIL_AT_STEP, failure_latency, full_run


def test_the_bench_failing_run_yields_its_detection_figure(airflow_db, tmp_path):
    run = full_run(tmp_path / "failure", Workloads(train_fail_at_step=FAIL_AT_STEP), {})
    assert run.result.state == "failed", run.result.why()
    figure = failure_latency(run)
    assert figure["value"] > 0 and figure["baseline"] > 0, figure
    assert figure["details"]["provider_statuses"] == ["error"], figure["details"]
