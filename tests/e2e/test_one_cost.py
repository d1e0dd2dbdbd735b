"""One run, one cost: the run report, the run's note and the RL page show the figure
`outcome` counted, in chip-hours and host-hours.

On main the report counted the TPU nodes to its own time (at verify, which runs beside the
cleanups) and the page counted them again to cleanup_cluster's end: two figures for one run
($1.66 in the report, $1.43 on the page in the issue's demo run)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from sqlalchemy import select

from sandbox.harness import SETTINGS, SPOT, Sandbox, Workloads
from tests.support.approval_wait import approval_body, scheduler_timeout_sweep
from tests.support.e2e_runs import reported_run


@dataclass
class Case:
    name: str = "one_cost_for_report_note_and_page"
    expected: str = "success"
    workloads: Workloads | None = None


def test_the_report_the_note_and_the_page_give_outcomes_one_cost(
    airflow_db, tmp_path, capfd, caplog, e2e_report
):
    from airflow.utils.session import create_session

    from tpu_rl.report.run_note import note_text
    from tpu_rl.ui.runs import fetch_runs

    with Sandbox(tmp_path).up() as box:
        result, _ = reported_run(box, Case(), {**SETTINGS, "num_batches": 50}, capfd, e2e_report)
        export = result.xcoms["verify.return_value"]
        report = json.loads(result.gcs.read(f"{export}run-report.json"))
        markdown = result.gcs.read(f"{export}run-report.md").decode()
    counted = result.xcoms["outcome.tpu_cost"]
    assert counted["rule"] == "tpu_node_life" and counted["host_hours"] > 0
    assert report["tpu"] == counted  # the report shows outcome's figure, not a count of its own
    with create_session() as session:
        # every run of this worker's DB: a scenario's run with a later run_after may be newer
        row = next(r for r in fetch_runs(session, 10_000) if r["run_id"] == result.run_id)
    for key in ("chip_hours", "host_hours", "estimated_cost_usd"):
        assert row[key] == counted[key], key  # the same figure, not one counted again
    assert counted["chip_hours"] == pytest.approx(4 * counted["host_hours"])  # 4 chips a host
    # a reservation: paid by its commitment, no spend of the run's own
    assert counted["estimated_cost_usd"] is None and counted["billed_as"] == "commitment"
    assert f"{counted['chip_hours']:.2f} chip-hours" in markdown and "commitment" in markdown
    # no API connection in dag.test: outcome logs the note it could not set, with that cost
    note = note_text(
        "succeeded: model exported and verified",
        result.xcoms["wait_for_rewards.return_value"],
        counted,
        f"{export}run-report.md",
    )
    assert "The run's note is not set" in caplog.text and note.split("\n\n")[2] in caplog.text


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
