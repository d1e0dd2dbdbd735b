"""The RL page's TPU-hours from the TPU nodes the run's steps saw: the run report's computation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from tests.ui import synthetic
from tests.ui.pages import get_runs, set_conf


@pytest.fixture
def client(auth_token) -> TestClient:
    """Three synthetic runs (the first one finished), filled for each test."""
    from tpu_rl.ui.app import app

    synthetic.add_runs(3)
    return TestClient(app)


def test_the_tpu_nodes_the_steps_saw_bill_as_in_the_run_report(client, auth_token):
    """Looks at the TPU nodes (the steps' `tpu_nodes` XComs): a flex-start slice created 15 min
    into the run, seen by convert, gone at export's look a minute after the reward wait: the
    row bills 8 nodes x that life, the run report's computation (tpu_rl.report.billing) gives
    the same figure, and the row names the rule and the price."""
    from airflow.utils.session import create_session

    from tpu_rl.report.billing import tpu_billing
    from tpu_rl.settings.run_settings import RunSettings

    run_id = "scheduled__synthetic-0000"
    # the zone's region prices it (tpu_rl.prices)
    conf = {"capacity": "flex_start", "reservation": "", "zone": "us-east5-b"}
    set_conf(run_id, conf)
    created = (synthetic.START + timedelta(minutes=15)).timestamp()
    nodes = {f"gke-tpu-{i}": created for i in range(8)}
    gone_at = (synthetic.START + timedelta(minutes=20, hours=2, seconds=60)).timestamp()
    looks = {
        "convert": [{"at": created + 60, "nodes": nodes}],
        "export": [{"at": gone_at, "nodes": {}}],
    }
    with create_session() as session:
        for task_id, value in looks.items():
            synthetic.put_summary(session, run_id, task_id, looks=value)
    row = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    assert row["tpu_hours_rule"] == "tpu_node_life"
    assert "cleanup_cluster's end" in row["tpu_hours_rule_text"]
    assert row["host_hours"] == pytest.approx(8 * (gone_at - created) / 3600)
    start, end = synthetic.START, synthetic.START + timedelta(hours=synthetic.RUN_HOURS)
    reported = tpu_billing(
        RunSettings(**conf), 8, [*looks["convert"], *looks["export"]],
        (start.timestamp(), end.timestamp()), {}, "the report",
    )  # fmt: skip
    assert row["host_hours"] == pytest.approx(reported["host_hours"])
    assert row["estimated_cost_usd"] == pytest.approx(reported["estimated_cost_usd"])
    assert row["price"]["basis"] == "upper bound"  # flex-start: the on-demand price bounds it
    assert row["price"]["capacity"] == "flex_start"


def test_a_run_whose_outcome_counted_its_cost_shows_that_figure(client, auth_token):
    """outcome's count (its summary's `cost`) is the run's one cost: the row shows it as
    counted, not a count of its own to another end (a page counting to cleanup_cluster's end
    beside a report counting to verify's time would show $1.43 on the page, $1.66 in the
    report)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import insert

    run_id = "scheduled__synthetic-0000"
    counted = {
        "host_hours": 0.1234,
        "chip_hours": 0.4936,
        "estimated_cost_usd": 1.33272,
        "rule": "tpu_node_life",
        "rule_text": "the run's TPU Node objects; counted to the run's end (outcome)",
        "price": {"capacity": "reservation", "usd_per_chip_hour": 2.7},
    }
    with create_session() as session:
        end = synthetic.START + timedelta(hours=synthetic.RUN_HOURS)
        session.execute(
            insert(TaskInstance.__table__), [synthetic.ti_row(run_id, "outcome", "success", end)]
        )
        synthetic.put_summary(session, run_id, "outcome", cost=counted)
    row = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    assert (row["host_hours"], row["chip_hours"]) == (0.1234, 0.4936)
    assert row["estimated_cost_usd"] == 1.33272 and row["tpu_hours_rule_text"].endswith("(outcome)")
    # outcome wrote the report beside the verified export: the row links its page
    assert row["report_url"] == f"report/{run_id}"
