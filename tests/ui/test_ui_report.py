"""The run's report page (/tpu-rl/report/<run id>): the report outcome wrote beside a verified
export, read from the sandbox's GCS through the product's own reader, as HTML."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from urllib.parse import quote

import httpx
import pytest

from sandbox.paths import TUTORIAL_CONF
from tests.ui import synthetic
from tpu_rl.names import UI_PREFIX

RUN_ID = "scheduled__synthetic-0000"  # verified export (synthetic: not stopped, not running)
STOPPED = "scheduled__synthetic-0003"  # the gate stopped it: no export, no report
REWARDS = {
    "pre": {"corr": 8, "total": 100, "accuracy": 8.0, "mean_reward": 0.0821},
    "post": {"corr": 12, "total": 100, "accuracy": 12.0, "mean_reward": 0.1234},
}
GATE = {"pre_mean_reward": 0.0821, "post_mean_reward": 0.1234, "gain": 0.0413}
DURATIONS = {"convert": 600.0, "start_backend": 300.0, "wait_for_rewards": 6840.0}


@pytest.fixture
def reported(gcs) -> str:
    """Synthetic runs; the first with the report outcome writes (tpu_rl.report.run_report,
    uploaded through the provider's GCSHook) and the summary fields that locate it."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import insert

    from tpu_rl.layout import RunLayout
    from tpu_rl.report import run_cost, run_report
    from tpu_rl.settings.run_settings import load_settings

    synthetic.add_runs(8)
    layout = RunLayout(load_settings(json.loads(TUTORIAL_CONF.read_text())), RUN_ID, "ui-test")
    tpu = run_cost.count_tpu_cost(layout, DURATIONS, 4 * 3600.0, [], time.time())
    report = run_report.build_report(layout, REWARDS, GATE, 50, DURATIONS, tpu)
    gcs.client().create_bucket(layout.settings.gcs_bucket)
    uri = run_report.write_report(report, "google_cloud_default")[-1]
    end = synthetic.START + timedelta(hours=synthetic.RUN_HOURS)
    with create_session() as session:
        outcome = synthetic.ti_row(RUN_ID, "outcome", "success", end)
        session.execute(insert(TaskInstance.__table__), [outcome])
        synthetic.put_summary(session, RUN_ID, "verify", export_uri=report["export_uri"])
        synthetic.put_summary(session, RUN_ID, "outcome", cost=tpu)
    return uri


def page(base: str, run_id: str, token: str | None) -> httpx.Response:
    cookies = {"_token": token} if token else None
    url = f"{base}{UI_PREFIX}/report/{quote(run_id, safe='')}"
    return httpx.get(url, cookies=cookies, timeout=60)


def test_a_reported_runs_page_is_its_report_as_html(ui_server, auth_token, reported):
    """Through the api-server's own mount: the note's and the RL page's link opens it."""
    response = page(ui_server, RUN_ID, auth_token)
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert f"<h1>Run report: {RUN_ID}</h1>" in html
    # the metrics table, as a table
    assert "<th>metric</th>\n<th>pre</th>\n<th>post</th>" in html
    assert "<td>mean_reward</td>\n<td>0.082</td>\n<td>0.123</td>" in html
    # back to the RL page and the run; on to the object in the Cloud Console
    assert '<a href="/plugin/rl-post-training">' in html
    assert f'<a href="/dags/tpu_rl_post_training/runs/{RUN_ID}">' in html
    bucket_path = reported.removeprefix("gs://")
    assert f"https://console.cloud.google.com/storage/browser/_details/{bucket_path}" in html
    # the RL page's row links the same page (relative to the page, /tpu-rl/)
    runs = httpx.get(f"{ui_server}{UI_PREFIX}/api/runs", cookies={"_token": auth_token}).json()
    row = next(r for r in runs["runs"] if r["run_id"] == RUN_ID)
    assert row["report_url"] == f"report/{RUN_ID}"


def test_the_reports_text_is_escaped_never_markup(ui_server, auth_token, reported, gcs):
    gcs.write(reported, b"# Report\n\n<script>alert(1)</script> [x](javascript:alert(1))\n")
    html = page(ui_server, RUN_ID, auth_token).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html
    assert 'href="javascript' not in html


def test_a_run_without_a_report_is_404_with_why(ui_server, auth_token, reported, gcs):
    stopped = page(ui_server, STOPPED, auth_token)
    assert stopped.status_code == 404
    assert stopped.text == (
        f"Run '{STOPPED}' has no report (no verified export): outcome writes it beside a "
        "verified export."
    )
    unknown = page(ui_server, "manual__no-such-run", auth_token)
    assert unknown.status_code == 404
    assert unknown.text == "tpu_rl_post_training has no run 'manual__no-such-run'."
    gcs.delete(reported)  # the summary says it was written; the bucket no longer has it
    gone = page(ui_server, RUN_ID, auth_token)
    assert (gone.status_code, gone.text) == (404, f"The report {reported} is not there.")


def test_only_a_user_who_may_read_the_runs_xcoms_sees_it(
    ui_server, auth_token, reported, monkeypatch
):
    assert page(ui_server, RUN_ID, None).status_code == 401
    assert page(ui_server, RUN_ID, "not-a-jwt").status_code == 403
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity

    manager = get_auth_manager()
    allowed = manager.is_authorized_dag

    def no_xcoms(*, method, access_entity=None, details=None, user):
        if access_entity == DagAccessEntity.XCOM:
            return False
        return allowed(method=method, access_entity=access_entity, details=details, user=user)

    monkeypatch.setattr(manager, "is_authorized_dag", no_xcoms)
    refused = page(ui_server, RUN_ID, auth_token)
    assert refused.status_code == 403 and "mean_reward" not in refused.text


def test_a_report_gcs_does_not_give_is_one_line_saying_why(
    ui_server, auth_token, reported, monkeypatch
):
    """No Google credentials where the api-server runs: a line, never a traceback."""
    from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
    from google.auth.exceptions import DefaultCredentialsError

    def no_credentials(hook):
        raise DefaultCredentialsError("Your default credentials were not found.\nSee the docs.")

    monkeypatch.setattr(GoogleBaseHook, "get_credentials_and_project_id", no_credentials)
    response = page(ui_server, RUN_ID, auth_token)
    assert response.status_code == 502
    assert response.text == (
        f"The report {reported} could not be read: DefaultCredentialsError: Your default "
        "credentials were not found. See the docs."
    )
