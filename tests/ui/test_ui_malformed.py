"""One malformed part of a run's summary, value in it, or run costs its own row, not the page: the
API answers 200, the other rows are what they were, the bad row says what it could not read."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.ui import synthetic
from tests.ui.pages import run_id
from tests.ui.synthetic import RawText, put_part, put_summary

RUNS = 40

# run number -> (task_id, field of its summary part, value stored, what the row's error must
# say). The runs are ones the gate passed (every 7th from the 4th is stopped), except 3,
# stopped: its failure message. No field: the value stored as the whole part.
MALFORMED: dict[int, tuple[str, str | None, Any, str]] = {
    0: ("wait_for_rewards", "rewards", [0.1, 0.2],
        "wait_for_rewards's rewards: the value should be an object but is a list"),
    1: ("wait_for_rewards", "rewards", {"pre": {"mean_reward": "high"}, "post": {}},
        "wait_for_rewards's rewards: pre's mean_reward should be a number but is a text"),
    2: ("wait_for_rewards", None, RawText('{"rewards": {"pre": {"mean_reward": 0.1'),
        "summary of wait_for_rewards: unparseable JSON"),
    3: ("gate", "failure", {"message": "gate"},
        "gate's failure: the value should be a text but is an object"),
    4: ("wait_for_rewards", "attempts", {"attempt": 1},
        "wait_for_rewards's attempts: the value should be a list but is an object"),
    5: ("wait_for_rewards", "attempts",
        [{"attempt": 1, "started": "yesterday", "ended": "2026-01-26T07:20:00+00:00"}],
        "wait_for_rewards's attempts: attempt 1's started should be a time but is a text"),
    6: ("gate", "gate", "passed", "gate's gate: the value should be an object but is a text"),
    8: ("verify", "export_uri", 42,
        "verify's export_uri: the value should be a gs:// URI but is a number"),
    9: ("export", "checkpoint_step", "fifty",
        "export's checkpoint_step: the value should be an integer but is a text"),
    11: ("convert", "looks", [{"nodes": {"gke-tpu-0": 1.0}}],
         "convert's looks: look 1's at should be a number but is null"),
    12: ("export", "looks", "not a list",
         "export's looks: the value should be a list but is a text"),
    # a serialized XCom (XComModel.serialize_value's JSON text) whose text is no JSON
    13: ("wait_for_rewards", None, '{"rewards": ',
         "summary of wait_for_rewards: the part should be an object but is a text"),
}  # fmt: skip
# run number -> (conf stored, what the row's error must say)
BAD_CONFS: dict[int, tuple[Any, str]] = {
    15: (
        ["cluster_nodepool_count", 2],
        "cost not counted: the run's conf should be an object",
    ),
    16: (RawText("{cluster_nodepool_count: 2"), "cost not counted: unparseable JSON"),
}


def put_value(session: Any, run: str, task_id: str, field: str | None, value: Any) -> None:
    """Store `value` as `field` of the task's summary part (None: as the whole part)."""
    if field is None:
        put_part(session, run, task_id, value)
    else:
        put_summary(session, run, task_id, **{field: value})


def put_conf(session: Any, run: str, conf: Any) -> None:
    from airflow.models.dagrun import DagRun
    from sqlalchemy import text, update

    if isinstance(conf, RawText):
        session.execute(
            text("UPDATE dag_run SET conf = :c WHERE run_id = :r"), {"c": str(conf), "r": run}
        )
    else:
        session.execute(update(DagRun).where(DagRun.run_id == run).values(conf=conf))


def seed_malformed() -> None:
    from airflow.utils.session import create_session

    with create_session() as session:
        for i, (task_id, field, value, _) in MALFORMED.items():
            put_value(session, run_id(i), task_id, field, value)
        for i, (conf, _) in BAD_CONFS.items():
            put_conf(session, run_id(i), conf)


@pytest.fixture
def client(auth_token) -> TestClient:
    from tpu_rl.ui.app import app

    synthetic.add_runs(RUNS)
    return TestClient(app, raise_server_exceptions=False)  # a 500, as a real server answers


def get_rows(client: TestClient, token: str) -> dict[str, dict[str, Any]]:
    response = client.get("/api/runs", cookies={"_token": token})
    assert response.status_code == 200, response.text[:2000]
    return {r["run_id"]: r for r in response.json()["runs"]}


def test_each_malformed_value_costs_its_own_row_only(client, auth_token):
    before = get_rows(client, auth_token)
    assert not any(r.get("error") for r in before.values())
    seed_malformed()
    after = get_rows(client, auth_token)

    bad = {run_id(i): said for i, (*_, said) in MALFORMED.items()}
    bad |= {run_id(i): said for i, (_, said) in BAD_CONFS.items()}
    assert after.keys() == before.keys()
    for run, row in after.items():
        if run not in bad:
            assert row == before[run]
            continue
        assert row["error"] is not None and row["error"].startswith(bad[run]), (run, row)
        assert "Traceback" not in row["error"] and "File " not in row["error"]
        assert row["state"] == before[run]["state"] and row["gate"] == before[run]["gate"]

    # the malformed value is left out, the rest of its row kept
    rewards_gone = after[run_id(0)]
    assert rewards_gone["pre_mean_reward"] is None and rewards_gone["gain"] is not None
    assert rewards_gone["host_hours"] == before[run_id(0)]["host_hours"]
    assert after[run_id(3)]["failure"] is None and after[run_id(3)]["pre_mean_reward"] is not None
    assert after[run_id(8)]["export_uri"] is None and after[run_id(8)]["checkpoint_step"] == 50
    assert after[run_id(9)]["checkpoint_step"] is None and after[run_id(9)]["export_uri"]
    assert after[run_id(11)]["host_hours"] == before[run_id(11)]["host_hours"]
    assert after[run_id(15)]["host_hours"] is None and after[run_id(15)]["post_mean_reward"]
