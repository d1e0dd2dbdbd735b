"""tpu_rl.ui.app: the routes' answers, with Airflow's user check and DB session replaced (the
real ones, and the runs' data: tests/ui/test_ui_api.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from airflow.api_fastapi.common.db.common import _get_session
from fastapi.testclient import TestClient

from tpu_rl.names import DAG_ID
from tpu_rl.ui import app as ui_app


@pytest.fixture
def client() -> Iterator[TestClient]:
    """The app with every user allowed and no DB session (the routes tested here read none)."""
    overrides = {
        ui_app.can_read_dag.dependency: lambda: None,
        ui_app.can_read_runs.dependency: lambda: None,
        ui_app.can_read_xcoms.dependency: lambda: None,
        _get_session: lambda: None,
    }
    ui_app.app.dependency_overrides.update(overrides)
    try:
        yield TestClient(ui_app.app)
    finally:
        ui_app.app.dependency_overrides.clear()


def test_the_pages_static_files_are_served_uncached(client):
    answer = client.get("/")
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-cache"
    assert answer.content == (ui_app.STATIC / "index.html").read_bytes()


def test_the_estimate_answers_any_text_with_its_problems_and_the_dag(client):
    answer = client.post("/api/estimate", content=b"\xffnot json").json()
    assert answer["dag_id"] == DAG_ID and answer["errors"][0].startswith("not valid JSON")


def test_a_report_is_the_page_under_airflows_root(client, monkeypatch):
    monkeypatch.setattr(ui_app, "report_uri", lambda session, run_id: f"gs://b/{run_id}/r.md")
    monkeypatch.setattr(ui_app, "read_text", lambda uri, conn: "# The report")
    answer = client.get("/report/manual__1", headers={})
    assert answer.status_code == 200 and "<h1>The report</h1>" in answer.text
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")


def test_a_run_without_a_report_is_404_saying_why(client, monkeypatch):
    def no_report(session: object, run_id: str) -> str:
        raise LookupError(f"run {run_id} has no verified export")

    monkeypatch.setattr(ui_app, "report_uri", no_report)
    answer = client.get("/report/manual__1")
    assert (answer.status_code, answer.text) == (404, "run manual__1 has no verified export")
    monkeypatch.setattr(ui_app, "report_uri", lambda session, run_id: "gs://b/r.md")
    monkeypatch.setattr(ui_app, "read_text", lambda uri, conn: None)
    assert client.get("/report/manual__1").text == "The report gs://b/r.md is not there."


def test_a_refused_read_is_502_in_one_line(client, monkeypatch):
    def refused(uri: str, conn: str) -> str:
        raise PermissionError("403 denied\n  for gs://b/r.md")

    monkeypatch.setattr(ui_app, "report_uri", lambda session, run_id: "gs://b/r.md")
    monkeypatch.setattr(ui_app, "read_text", refused)
    answer = client.get("/report/manual__1")
    assert answer.status_code == 502
    assert answer.text == (
        "The report gs://b/r.md could not be read: PermissionError: 403 denied for gs://b/r.md"
    )


def test_the_estimate_route_refuses_a_user_who_may_not_read_the_dag(client):
    from fastapi import HTTPException

    def forbidden() -> None:
        raise HTTPException(403, "Forbidden")

    ui_app.app.dependency_overrides[ui_app.can_read_dag.dependency] = forbidden
    answer = client.post("/api/estimate", content=json.dumps({}).encode())
    assert answer.status_code == 403
