"""The RL page's TPU-hours from the TPU nodes the run's steps saw: the run report's computation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from tests.ui import synthetic
from tests.ui.test_ui_api import get_runs, set_conf


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
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import insert, select

    from tpu_rl.report.billing import tpu_billing
    from tpu_rl.settings.run_settings import RunSettings

    run_id = "scheduled__synthetic-0000"
    conf = {"capacity": "flex_start", "reservation": ""}
    set_conf(run_id, conf)
    created = (synthetic.START + timedelta(minutes=15)).timestamp()
    nodes = {f"gke-tpu-{i}": created for i in range(8)}
    gone_at = (synthetic.START + timedelta(minutes=20, hours=2, seconds=60)).timestamp()
    looks = {
        "convert": [{"at": created + 60, "nodes": nodes}],
        "export": [{"at": gone_at, "nodes": {}}],
    }
    with create_session() as session:
        dag_run_id = session.scalar(select(DagRun.id).where(DagRun.run_id == run_id))
        rows = [
            {"dag_run_id": dag_run_id, "dag_id": synthetic.DAG_ID, "run_id": run_id,
             "task_id": task_id, "key": "tpu_nodes", "map_index": -1, "value": value,
             "timestamp": synthetic.START}
            for task_id, value in looks.items()
        ]  # fmt: skip
        session.execute(insert(XComModel.__table__), rows)
    row = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    assert row["tpu_hours_rule"] == "tpu_node_life"
    assert "cleanup_cluster's end" in row["tpu_hours_rule_text"]
    assert row["tpu_hours"] == pytest.approx(8 * (gone_at - created) / 3600)
    start, end = synthetic.START, synthetic.START + timedelta(hours=synthetic.RUN_HOURS)
    reported = tpu_billing(
        RunSettings(**conf), 8, [*looks["convert"], *looks["export"]],
        (start.timestamp(), end.timestamp()), {}, "the report",
    )  # fmt: skip
    assert row["tpu_hours"] == pytest.approx(reported["tpu_hours"])
    assert row["estimated_cost_usd"] == pytest.approx(reported["estimated_cost_usd"])
    assert row["price"]["basis"] == "on-demand equivalent"
    assert row["price"]["capacity"] == "flex_start"
