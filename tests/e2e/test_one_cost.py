"""One run, one cost: the run report, the run's note and the RL page show the figure
`outcome` counted, in chip-hours and host-hours.

On main the report counted the TPU nodes to its own time (at verify, which runs beside the
cleanups) and the page counted them again to cleanup_cluster's end: two figures for one run
($1.66 in the report, $1.43 on the page in the issue's demo run). The default run's one figure is
checked on test_scenarios' success_create (the same run); here, a Spot run whose approval waits."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from sqlalchemy import select

from sandbox.harness import SPOT, RunResult, Sandbox, Workloads
from tests.support.approval_wait import approval_body, scheduler_timeout_sweep
from tests.support.e2e_runs import reported_run


@dataclass
class Case:
    name: str
    expected: str = "success"
    workloads: Workloads | None = None


def run_times(run_id: str) -> tuple[float, float]:
    """The run's start and cleanup_cluster's end (epoch seconds), from the metadata DB."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        run = session.scalars(select(DagRun).where(DagRun.run_id == run_id)).one()
        cleanup = session.scalars(
            select(TaskInstance).where(
                TaskInstance.run_id == run_id, TaskInstance.task_id == "cleanup_cluster"
            )
        ).one()
        return run.start_date.timestamp(), cleanup.end_date.timestamp()


@pytest.mark.timeout(600)
def test_waiting_for_a_persons_approval_costs_no_tpu_time(airflow_db, tmp_path, capfd, e2e_report):
    """The wait for an approval is not TPU time: counted to outcome's start, a 60-s wait would
    make the note, the report and the RL page say $3.05 where the request said $1.56 and the
    same run without approval costs $1.55.

    A Spot run (a static pool from deploy to destroy, billed by its hours) with
    approval=required whose request waits its whole approval_timeout_minutes (1 min) and is
    rejected on timeout. Its cost is what it would be without the wait: the nodes it saw,
    counted to cleanup_cluster's end (the cluster destroyed); and the request shows the figure
    the report, the note and the page show (counted to outcome's start, the minute's wait
    would add the pool's seconds over 60 to the figure)."""
    from airflow.utils.session import create_session

    from tpu_rl.report.billing import tpu_billing
    from tpu_rl.report.run_report import cost_text
    from tpu_rl.report.tpu_nodes import merged
    from tpu_rl.settings.run_settings import load_settings
    from tpu_rl.ui.runs import fetch_runs

    conf = {**SPOT, "num_batches": 50, "checkpoint_period": 25}
    conf |= {"approval": "required", "approval_timeout_minutes": 1}
    case = Case("spot_with_a_minute_of_approval_wait")
    with Sandbox(tmp_path).up() as box, scheduler_timeout_sweep():
        result, _ = reported_run(box, case, conf, capfd, e2e_report)
        export = result.xcoms["verify.return_value"]
        report = json.loads(result.gcs.read(f"{export}run-report.json"))
    assert result.task_states["approve"] == "success", result.task_states  # timed out: reject
    assert result.task_states["promote"] == "skipped", result.task_states
    counted = result.xcoms["outcome.tpu_cost"]
    looks = merged(v for k, v in result.xcoms.items() if k.endswith(".tpu_nodes"))
    started, destroyed = run_times(result.run_id)
    without_wait = tpu_billing(load_settings(conf), 8, looks, (started, destroyed), {}, "")
    assert counted["rule"] == "tpu_node_life" and counted["nodes_seen"] == 8, counted
    # the same figure as without the wait (cleanup_cluster marks the release just before its
    # task ends), not a minute of 8 hosts more
    assert counted["pool_seconds"] == pytest.approx(without_wait["pool_seconds"], abs=1.0)
    assert counted["estimated_cost_usd"] == pytest.approx(
        without_wait["estimated_cost_usd"], rel=0.1
    )
    assert "costs no TPU time" in counted["rule_text"]
    # one figure: the approval request, the report, the note's text and the page
    assert report["tpu"] == counted
    assert cost_text(counted, "spot") in approval_body(result.run_id)
    with create_session() as session:
        row = next(r for r in fetch_runs(session, 10_000) if r["run_id"] == result.run_id)
    assert row["estimated_cost_usd"] == counted["estimated_cost_usd"]
    spot_is_a_static_pool_billed_from_deploy_to_destroy(result, counted)


def spot_is_a_static_pool_billed_from_deploy_to_destroy(result: RunResult, tpu: dict) -> None:
    """gcluster gives the Spot pool static_node_count: its 8 nodes come with the cluster and go
    with it, no pod ever triggers a scale-up; the cost bills them from their creation, at Spot's
    own price in the zone's region (the billing catalogue's snapshots' highest), not the
    on-demand one. Counted as a pool from zero (the TPU steps' task times, rule `tpu_nodes`),
    Spot would bill only those hours."""
    assert "TriggeredScaleUp" not in {e["reason"] for e in result.emu.list("events")}
    nodes = [n for n in result.ledger.nodes if n.tpu]
    assert len(nodes) == 8, nodes  # one slice, never scaled down and up again
    first_tpu_pod = min(p.started for p in result.ledger.tpu_pods)
    assert max(n.started for n in nodes) < first_tpu_pod  # made by the deploy, not by a pod
    assert all(n.ended is not None for n in nodes)  # destroyed with the cluster
    assert (tpu["price"]["capacity"], tpu["price"]["basis"]) == ("spot", "list price")
    assert (tpu["price"]["region"], tpu["price"]["usd_per_chip_hour"]) == ("us-east5", 1.35)
