"""One run, one cost (issue 28): the run report, the run's note and the RL page show the figure
`outcome` counted, in chip-hours and host-hours.

On main the report counted the TPU nodes to its own time (at verify, which runs beside the
cleanups) and the page counted them again to cleanup_cluster's end: two figures for one run
($1.66 in the report, $1.43 on the page in the issue's demo run)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tests.e2e.test_strict_cloud import reported_run
from tests.sandbox.harness import SETTINGS, Sandbox, Workloads


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
    dollars = f"${counted['estimated_cost_usd']:,.2f}"
    assert dollars in markdown and f"{counted['chip_hours']:.2f} chip-hours" in markdown
    # no API connection in dag.test: outcome logs the note it could not set, with that cost
    note = note_text(
        "succeeded: model exported and verified",
        result.xcoms["wait_for_rewards.return_value"],
        counted,
        f"{export}run-report.md",
    )
    assert "The run's note is not set" in caplog.text and note.split("\n\n")[2] in caplog.text
