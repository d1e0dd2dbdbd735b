"""The JSON API the page reads, against a DB of 500 synthetic runs."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from tests.support.heldout import ARC, GSM8K, MMLU_FELL, heldout_xcom
from tests.ui import synthetic
from tests.ui.pages import get_runs, set_conf
from tpu_rl.names import DAG_ID

RUNS = 500
STATEMENTS_PER_REQUEST = 10  # whatever the number of runs (3 when this was written)


@pytest.fixture
def client(auth_token) -> TestClient:
    """Filled for each test: under pytest-xdist other tests' runs may land in the same DB."""
    from tpu_rl.ui.app import app

    synthetic.add_runs(RUNS)
    return TestClient(app)


def test_needs_an_authenticated_user(client):
    assert client.get("/api/runs").status_code == 401
    assert client.get("/api/runs", cookies={"_token": "not-a-jwt"}).status_code == 403


def test_all_500_runs_newest_first_with_their_numbers(client, auth_token):
    runs = get_runs(client, auth_token)
    assert len(runs) == RUNS
    assert runs[0]["run_id"] == f"scheduled__synthetic-{RUNS - 1:04d}"
    assert [r["run_after"] for r in runs] == sorted((r["run_after"] for r in runs), reverse=True)
    by_id = {r["run_id"]: r for r in runs}

    passed = by_id["scheduled__synthetic-0000"]
    pre, post = synthetic.rewards(0)
    assert (passed["pre_mean_reward"], passed["post_mean_reward"]) == (pre, post)
    assert passed["gain"] == pytest.approx(post - pre)
    assert passed["pre_accuracy"] == 12.5 and passed["post_accuracy"] == 18.75
    assert passed["gate"] == "passed" and passed["state"] == "success"
    assert passed["duration_seconds"] == 4 * 3600
    # the run made its cluster: the reserved pool bills from create_cluster's start to
    # cleanup_cluster's end, 4 h; 1 slice of v6e-32: 8 hosts; paid by the reservation's
    # commitment: no spend of the run's own (tpu_rl.prices)
    assert passed["tpu_hours_rule"] == "created_pool"
    assert "cleanup_cluster" in passed["tpu_hours_rule_text"]
    assert passed["host_hours"] == pytest.approx(32.0)
    assert passed["estimated_cost_usd"] is None
    assert passed["checkpoint_step"] == 50
    assert passed["export_uri"] == "gs://bucket/gemma4-26b/hf-trained/rl-0000000000/"
    assert passed["export_url"] == (
        "https://console.cloud.google.com/storage/browser/bucket/gemma4-26b/hf-trained/rl-0000000000/"
    )
    assert passed["report_url"] is None  # no outcome counted it: no report written yet
    assert passed["run_url"] == "dags/tpu_rl_post_training/runs/scheduled__synthetic-0000"
    assert passed["logs_url"].endswith("/tasks/wait_for_rewards")

    assert by_id["scheduled__synthetic-0001"]["host_hours"] == pytest.approx(64.0)  # 2 slices
    stopped = by_id["scheduled__synthetic-0003"]
    pre, post = synthetic.rewards(3)
    assert stopped["gate"] == "stopped" and post < pre
    assert stopped["gain"] == pytest.approx(post - pre)
    assert stopped["export_uri"] is None and stopped["checkpoint_step"] is None
    assert stopped["failure"]["task_id"] == "gate"  # what the failure callback recorded
    assert stopped["failure"]["message"].startswith(
        f"reward gate: post-training mean_reward={post}"
    )
    assert passed["failure"] is None
    running = runs[0]
    assert running["gate"] == "pending" and running["pre_mean_reward"] is None
    assert running["host_hours"] is None  # the pool is still up


def test_an_existing_reserved_pool_bills_the_runs_span(client, auth_token):
    set_conf("scheduled__synthetic-0000", {"cluster_mode": "existing", "reservation": "r"})
    row = next(r for r in get_runs(client, auth_token) if r["run_id"].endswith("-0000"))
    assert row["tpu_hours_rule"] == "existing_static_pool"
    assert row["host_hours"] == pytest.approx(8 * synthetic.RUN_HOURS)


def test_without_a_reservation_the_tpu_nodes_bill_convert_and_export_included(client, auth_token):
    set_conf("scheduled__synthetic-0000", {"cluster_mode": "existing", "reservation": ""})
    row = next(r for r in get_runs(client, auth_token) if r["run_id"].endswith("-0000"))
    assert row["tpu_hours_rule"] == "tpu_nodes" and "convert" in row["tpu_hours_rule_text"]
    seconds = synthetic.CONVERT_SECONDS + synthetic.POOL_SECONDS + synthetic.EXPORT_SECONDS
    assert row["host_hours"] == pytest.approx(8 * seconds / 3600)


def test_a_spot_run_bills_its_nodes_and_a_failed_runs_attempts_show_from_its_summary(
    client, auth_token
):
    """A failed wait writes its attempts as the summary's `attempts` (its rewards never come):
    the row lists each with its TPU node-hours and the steps computed again."""
    from airflow.utils.session import create_session

    run_id = "scheduled__synthetic-0003"  # a run that ended failed
    set_conf(run_id, {"capacity": "spot", "reservation": ""})
    attempts = [
        {"attempt": 1, "started": "2026-01-26T06:20:00+00:00", "ended": "2026-01-26T07:20:00+00:00",
         "outcome": "capacity_lost", "resumed_from_step": None, "reached_step": 73,
         "tpu_hosts": 8},
        {"attempt": 2, "started": "2026-01-26T07:50:00+00:00", "ended": "2026-01-26T08:20:00+00:00",
         "outcome": "capacity_lost", "resumed_from_step": 50, "reached_step": 58, "tpu_hosts": 8},
    ]  # fmt: skip
    with create_session() as session:
        synthetic.put_part(session, run_id, "wait_for_rewards", {"attempts": attempts})
    row = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    # no node records: a Spot pool the run created is static (gcluster's static_node_count)
    assert row["tpu_hours_rule"] == "created_pool" and "Spot" in row["tpu_hours_rule_text"]
    costs = [(a["tpu_node_hours"], a["steps_recomputed"]) for a in row["attempts"]]
    assert costs == [(pytest.approx(8.0), 23), (pytest.approx(4.0), None)]
    assert row["steps_recomputed"] == 23
    others = [r for r in get_runs(client, auth_token) if r["run_id"] != run_id]
    assert all(r["attempts"] == [] and r["steps_recomputed"] == 0 for r in others)


def test_the_ladders_tries_are_create_clusters_part_of_the_summary(client, auth_token):
    """The ladder's tries are create_cluster's part of the summary, whichever step moved the
    run (tpu_rl.cluster.rung_record writes both): the row shows them."""
    from airflow.utils.session import create_session

    run_id = "scheduled__synthetic-0004"
    first = {
        "rung": "flex_start@us-east5-b",
        "outcome": "ready",
        "reason": None,
        "started": "2026-01-26T06:00:00+00:00",
        "ended": "2026-01-26T06:01:00+00:00",
    }
    moved = [{**first, "outcome": "no_slice", "reason": "GCE out of resources"},
             {**first, "rung": "flex_start@us-east5-a"}]  # fmt: skip
    with create_session() as session:
        synthetic.put_summary(session, run_id, "create_cluster", rungs=moved)
    row = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    assert [(t["rung"], t["outcome"]) for t in row["rungs"]] == [
        ("flex_start@us-east5-b", "no_slice"),
        ("flex_start@us-east5-a", "ready"),
    ], row["rungs"]


@pytest.mark.parametrize(
    ("wait_state", "pool_end_task"),
    [("failed", "wait_for_rewards"), ("upstream_failed", "cleanup_kubernetes")],
)
def test_a_failed_runs_tpu_hours_end_where_its_backend_was_deleted(
    client, auth_token, wait_state, pool_end_task
):
    """Training failed: the sensor deleted the backend; it never waited: cleanup did.

    On an existing cluster without a reservation, where the backend's TPU nodes are what bills.
    """
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import delete, insert, update

    run_id = "scheduled__synthetic-0000"
    set_conf(run_id, {"cluster_mode": "existing", "reservation": ""})
    pool_start = synthetic.START + timedelta(minutes=20)
    ends = {"wait_for_rewards": pool_start + timedelta(hours=1)}
    ends["stop_backend"] = ends["wait_for_rewards"] + timedelta(seconds=1)  # upstream_failed
    ends["cleanup_kubernetes"] = ends["wait_for_rewards"] + timedelta(minutes=30)
    states = {"wait_for_rewards": wait_state, "stop_backend": "upstream_failed"}
    with create_session() as session:
        for task_id, state in states.items():
            session.execute(
                update(TaskInstance)
                .where(TaskInstance.run_id == run_id, TaskInstance.task_id == task_id)
                .values(state=state, end_date=ends[task_id])
            )
        cleanup = synthetic.ti_row(
            run_id,
            "cleanup_kubernetes",
            "success",
            ends["stop_backend"],
            ends["cleanup_kubernetes"],
        )
        session.execute(insert(TaskInstance.__table__), [cleanup])
        for task_id in ("convert", "export"):  # only the backend's time is asserted here
            session.execute(
                delete(TaskInstance).where(
                    TaskInstance.run_id == run_id, TaskInstance.task_id == task_id
                )
            )
    row = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    hours = (ends[pool_end_task] - pool_start).total_seconds() / 3600
    assert row["host_hours"] == pytest.approx(8 * hours)  # 8 hosts of v6e-32


def test_a_run_made_before_the_summary_shows_what_airflow_knows_and_says_so(client, auth_token):
    """A run that ended without a summary (made before its tasks kept one): its state, times,
    the gate's verdict and the hours its tasks' times give; no rewards or results, and
    `summary` false, which the page says under its row. A run still going is not one."""
    from airflow.utils.session import create_session

    before = {r["run_id"]: r for r in get_runs(client, auth_token)}
    old = "scheduled__synthetic-0000"
    with create_session() as session:
        synthetic.drop_summary(session, old)
    after = {r["run_id"]: r for r in get_runs(client, auth_token)}
    row, was = after[old], before[old]
    assert row["summary"] is False and was["summary"] is True
    for key in ("state", "run_after", "duration_seconds", "gate", "host_hours", "run_url"):
        assert row[key] == was[key], key
    assert row["pre_mean_reward"] is None and row["export_uri"] is None
    assert row["evaluations"] == [] and row["error"] is None
    running = after[f"scheduled__synthetic-{RUNS - 1:04d}"]  # no part yet, still running
    assert running["summary"] is True
    assert all(r == before[r["run_id"]] for r in after.values() if r["run_id"] != old)


def test_the_rows_read_the_summarys_key_alone_each_field_from_its_writer(client, auth_token):
    """What the page reads of a run is its summary (tpu_rl.run_summary): another XCom of the
    run's tasks changes nothing, and a field in the part of a task that does not write it is
    not shown (a field of a newer version neither, nor is it an error)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import insert, select

    run_id = "scheduled__synthetic-0000"
    before = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    with create_session() as session:
        dag_run_id = session.scalar(select(DagRun.id).where(DagRun.run_id == run_id))
        base = {"dag_run_id": dag_run_id, "dag_id": DAG_ID, "run_id": run_id, "map_index": -1,
                "timestamp": synthetic.START}  # fmt: skip
        session.execute(
            insert(XComModel.__table__),
            [{**base, "task_id": "verify", "key": "return_value", "value": "gs://other/"},
             {**base, "task_id": "export", "key": "checkpoint_step", "value": 7}],
        )  # fmt: skip
        synthetic.put_summary(session, run_id, "gate", export_uri="gs://b/not-verified/")
        synthetic.put_summary(session, run_id, "verify", progress={"step": 3})
    row = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    assert row == before


def test_a_run_whose_heldout_evaluation_ran_shows_its_scores_per_step_and_benchmarks(
    client, auth_token
):
    """evaluate_heldout's return value (HeldoutReport.as_dict) is the row's `heldout`: each
    scored step's accuracy, the best step, a row per benchmark with its verdicts in words. A run
    whose evaluation was off (the step skipped: no value) has `heldout` null; so does every
    other run, whatever their other XComs."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import insert, select

    run_id = "scheduled__synthetic-0000"
    report = heldout_xcom(GSM8K, ARC, MMLU_FELL, step=40, step_scores={"30": 0.7, "40": 0.72})
    with create_session() as session:
        scored = synthetic.ti_row(run_id, "evaluate_heldout", "success", synthetic.START)
        session.execute(insert(TaskInstance.__table__), [scored])
        dag_run_id = session.scalar(select(DagRun.id).where(DagRun.run_id == run_id))
        base = {"dag_run_id": dag_run_id, "dag_id": DAG_ID, "run_id": run_id, "map_index": -1,
                "timestamp": synthetic.START, "task_id": "evaluate_heldout"}  # fmt: skip
        session.execute(
            insert(XComModel.__table__),
            [{**base, "key": "return_value", "value": report},
             {**base, "key": "models", "value": [["step-40", "gs://b/40"]]}],
        )  # fmt: skip
    rows = {r["run_id"]: r for r in get_runs(client, auth_token)}
    shown = rows[run_id]["heldout"]
    assert shown["step"] == 40
    assert shown["scores"] == [{"step": 30, "score": 0.7}, {"step": 40, "score": 0.72}]
    assert [(r["task"], r["guard"], r["items"]) for r in shown["rows"]] == [
        ("gsm8k", False, 1000),
        ("arc_easy", False, 400),
        ("mmlu", True, 500),
    ]
    gsm8k = shown["rows"][0]
    assert (gsm8k["candidate"], gsm8k["champion"], gsm8k["base"]) == (0.76, 0.74, 0.64)
    verdicts = [(r["vs_champion"]["verdict"], r["vs_base"]["verdict"]) for r in shown["rows"]]
    assert verdicts == [
        ("not distinguishable", "better"),
        ("not distinguishable", "better"),
        ("not distinguishable", "worse"),  # the guard fell
    ]
    assert shown["verdict"].startswith("Held-out (95% level): step 40 better than the base model")
    assert rows[run_id]["error"] is None
    assert all(r["heldout"] is None for r in rows.values() if r["run_id"] != run_id)


def test_limit(client, auth_token):
    assert len(get_runs(client, auth_token, limit=20)) == 20
    response = client.get("/api/runs", params={"limit": 0}, cookies={"_token": auth_token})
    assert response.status_code == 422


def test_two_queries_whatever_the_number_of_runs(client, auth_token):
    from airflow.settings import engine
    from sqlalchemy import event

    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        for limit in (5, RUNS):
            statements.clear()
            get_runs(client, auth_token, limit=limit)
            data = [s for s in statements if "dag_run" in s or "xcom" in s]
            assert len(data) == 2, data
    finally:
        event.remove(engine, "before_cursor_execute", count)


def test_the_page_and_its_script_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and '<svg id="chart"' in page.text
    assert client.get("/page.js").headers["content-type"].startswith("text/javascript")


def test_bench_500_runs(client, auth_token, capsys):
    """The table's request for 500 runs costs a bounded number of SQL statements, not a few per
    run (an N+1 would be thousands); its time is printed for `make bench`-style reports."""
    from airflow import settings
    from sqlalchemy import event

    get_runs(client, auth_token)
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(settings.engine, "before_cursor_execute", count)
    times = []
    try:
        for _ in range(5):
            start = time.perf_counter()
            get_runs(client, auth_token)
            times.append(time.perf_counter() - start)
    finally:
        event.remove(settings.engine, "before_cursor_execute", count)
    per_request = len(statements) / 5
    with capsys.disabled():
        print(
            f"\n/api/runs with {RUNS} runs: best {min(times) * 1000:.0f} ms, "
            f"worst {max(times) * 1000:.0f} ms of 5, {per_request:.0f} SQL statements each"
        )
    assert 0 < per_request <= STATEMENTS_PER_REQUEST, statements[:20]


def test_a_conf_validation_would_refuse_costs_nothing_but_its_tpu_hours(client, auth_token):
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with create_session() as session:
        session.execute(
            update(DagRun)
            .where(DagRun.run_id == "scheduled__synthetic-0000")
            .values(conf={"topology": "4by8", "compute_type": 7})
        )
    row = next(r for r in get_runs(client, auth_token) if r["run_id"].endswith("-0000"))
    assert row["host_hours"] is None and row["estimated_cost_usd"] is None
    assert row["gate"] == "passed"


def test_a_run_whose_validate_failed_costs_nothing_as_its_note_says(client, auth_token):
    """A run refused by `validate`, whose note says "TPU cost: not counted", shows no task-time
    hours or dollars on the page."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import insert

    run_id = "scheduled__synthetic-0000"
    set_conf(run_id, {"cluster_mode": "existing", "reservation": "r"})
    with create_session() as session:
        refused = synthetic.ti_row(run_id, "validate", "failed", synthetic.START, synthetic.START)
        session.execute(insert(TaskInstance.__table__), [refused])
    row = next(r for r in get_runs(client, auth_token) if r["run_id"] == run_id)
    assert row["host_hours"] is None and row["estimated_cost_usd"] is None
    assert row["error"] is None


def test_needs_the_permission_to_read_the_runs_xcoms(client, auth_token, monkeypatch):
    """The rewards come from XComs: a user who may read runs but not XComs gets nothing."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity

    manager = get_auth_manager()
    allowed = manager.is_authorized_dag
    asked = []

    def no_xcoms(*, method, access_entity=None, details=None, user):
        asked.append(access_entity)
        if access_entity == DagAccessEntity.XCOM:
            return False
        return allowed(method=method, access_entity=access_entity, details=details, user=user)

    monkeypatch.setattr(manager, "is_authorized_dag", no_xcoms)
    response = client.get("/api/runs", cookies={"_token": auth_token})
    assert response.status_code == 403, response.text[:300]
    assert DagAccessEntity.RUN in asked and DagAccessEntity.XCOM in asked
